// Live tail of a topic: rows prepended to #tail as the console's websocket sends them,
// with readable UTC store times and message ids that open the message's page.
(function () {
  const script = document.currentScript;
  const table = document.querySelector("#tail tbody");
  const status = document.getElementById("tail-status");
  const button = document.getElementById("tail-button");
  const messageUrl = script.dataset.messageUrl || "";
  const numbers = new Intl.NumberFormat("en");
  let socket = null;

  // Epoch milliseconds as the pages show them: 2026-11-26 03:20:00.123Z (UTC).
  function utc(ms) {
    if (typeof ms !== "number" || ms <= 0) return "";
    return new Date(ms).toISOString().replace("T", " ");
  }

  function cell(tr, value, className) {
    const td = document.createElement("td");
    if (value instanceof Node) td.appendChild(value); else td.textContent = String(value);
    if (className) td.className = className;
    tr.appendChild(td);
  }

  function row(m) {
    const tr = document.createElement("tr");
    cell(tr, utc(m.storeTimestamp), "time");
    const link = document.createElement("a");
    link.className = "msg-link";
    link.href = messageUrl.replace("MSGID", encodeURIComponent(m.msgId));
    link.textContent = m.msgId;
    cell(tr, link);
    cell(tr, `${m.brokerName}:${m.queueId}`);
    cell(tr, numbers.format(m.queueOffset), "num");
    cell(tr, m.tags || "");
    cell(tr, m.keys || "");
    cell(tr, numbers.format(m.bodySize), "num");
    return tr;
  }

  button.addEventListener("click", () => {
    if (socket) { socket.close(); socket = null; button.textContent = "Start live tail"; status.textContent = "stopped"; return; }
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}${script.dataset.ws}`);
    button.textContent = "Stop live tail";
    status.textContent = "connecting…";
    socket.onopen = () => { status.textContent = "finding the end of each queue…"; };
    socket.onmessage = (event) => {
      const data = JSON.parse(event.data);
      if (data.error) { status.textContent = data.error; return; }
      // From here on, every message stored is shown.
      if (data.ready) { status.textContent = "waiting for new messages…"; return; }
      for (const m of data.messages) table.prepend(row(m));
      status.textContent = data.skipped
        ? `${numbers.format(data.skipped)} message(s) skipped (more than 200 a second)`
        : "live";
    };
    socket.onclose = () => { if (socket) status.textContent = "disconnected"; };
  });
})();
