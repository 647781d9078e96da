// Live lag alerts on every signed-in page: the console's /ws/alerts/ socket sends each
// alert raised or resolved (of the clusters the user may view); each shows as a toast for
// a while, and the cluster navigation's open-alert count follows.  A dropped socket
// reconnects after a growing pause.
(function () {
  const script = document.currentScript;
  const path = script.dataset.ws;
  const box = document.getElementById("alert-toasts");
  if (!box || !path) return;
  Object.assign(box.style, {
    position: "fixed", right: "1rem", bottom: "1rem", display: "flex",
    flexDirection: "column", gap: "0.5rem", maxWidth: "28rem", zIndex: 1000,
  });

  function toast(data) {
    const raised = data.event === "raised";
    const item = document.createElement("div");
    item.className = "toast " + (raised ? "error" : "notice");
    item.setAttribute("role", raised ? "alert" : "status");
    Object.assign(item.style, {
      padding: "0.6rem 0.9rem", borderRadius: "6px", boxShadow: "0 2px 8px rgba(0,0,0,0.15)",
      background: raised ? "#fdecea" : "#e6f4ea", color: raised ? "#a12622" : "#1e6b34",
      border: "1px solid " + (raised ? "#f1b5b0" : "#b7dfc3"),
    });
    const link = document.createElement("a");
    link.href = `/clusters/${encodeURIComponent(data.alert.cluster)}/alerts/`;
    link.textContent = data.text;
    link.style.color = "inherit";
    item.appendChild(link);
    const close = document.createElement("button");
    close.type = "button";
    close.className = "link";
    close.textContent = "×";
    close.setAttribute("aria-label", "dismiss");
    close.style.marginLeft = "0.5rem";
    close.onclick = () => item.remove();
    item.appendChild(close);
    box.appendChild(item);
    setTimeout(() => item.remove(), raised ? 60000 : 15000);
  }

  function count(data) {
    const link = document.getElementById("alerts-link");
    const badge = document.getElementById("alert-count");
    if (!link || !badge || link.dataset.cluster !== data.alert.cluster) return;
    const now = Math.max(0, (parseInt(badge.textContent, 10) || 0) + (data.event === "raised" ? 1 : -1));
    badge.textContent = String(now);
    badge.hidden = now === 0;
  }

  let retryMs = 5000; // after a drop: 5 s, 10 s, 20 s ... up to a minute

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}${path}`);
    socket.onmessage = (event) => {
      const data = JSON.parse(event.data);
      toast(data);
      count(data);
    };
    socket.onopen = () => { retryMs = 5000; };
    socket.onclose = (event) => {
      if (event.code === 4403) return;
      setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, 60000);
    };
  }
  connect();
})();
