// Live tail of a topic: rows prepended to #tail as the console's websocket sends them.
(function () {
  const script = document.currentScript;
  const table = document.querySelector("#tail tbody");
  const status = document.getElementById("tail-status");
  const button = document.getElementById("tail-button");
  let socket = null;

  function row(m) {
    const tr = document.createElement("tr");
    for (const value of [m.storeTimestamp, m.msgId, `${m.brokerName}:${m.queueId}`, m.queueOffset, m.tags || "", m.keys || "", m.bodySize]) {
      const td = document.createElement("td");
      td.textContent = String(value);
      tr.appendChild(td);
    }
    return tr;
  }

  button.addEventListener("click", () => {
    if (socket) { socket.close(); socket = null; button.textContent = "Start live tail"; status.textContent = "stopped"; return; }
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}${script.dataset.ws}`);
    button.textContent = "Stop live tail";
    status.textContent = "waiting for new messages…";
    socket.onmessage = (event) => {
      const data = JSON.parse(event.data);
      if (data.error) { status.textContent = data.error; return; }
      for (const m of data.messages) table.prepend(row(m));
      status.textContent = data.skipped ? `${data.skipped} message(s) skipped (more than 200 a second)` : "live";
    };
    socket.onclose = () => { if (socket) status.textContent = "disconnected"; };
  });
})();
