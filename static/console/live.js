// Live cluster figures on the dashboard: the cards, the TPS chart and the brokers table, all
// from one sample that the console's websocket (/ws/clusters/<cluster>/live/) pushes every
// two seconds.  The server sends each figure as text formatted the way the page's own
// cells are (console/clusters/consumers.py), so a cell reads the same whoever wrote it.  When the
// socket drops, or the brokers cannot be read, or no sample comes for a while, a notice
// says so and the figures are dimmed (never stale numbers silently); the socket reconnects
// after 1 s, 2 s, 4 s ... up to 30 s.
(function () {
  const script = document.currentScript;
  const path = script.dataset.ws;
  const chartBox = document.getElementById("tps-chart");
  const chart = chartBox && window.echarts ? window.echarts.init(chartBox) : null;
  const points = { put: [], get: [] };
  const QUIET_MS = 15000;
  const RETRY_FIRST_MS = 1000;
  const RETRY_MAX_MS = 30000;
  let retryMs = RETRY_FIRST_MS;
  let quiet = null;

  // The notice under the page's heading: hidden while the figures are live.
  const notice = document.createElement("p");
  notice.id = "live-status";
  notice.setAttribute("role", "status");
  notice.hidden = true;
  Object.assign(notice.style, {
    padding: "0.5rem 0.9rem", border: "1px solid #f0d58c", background: "#fff8e1",
    color: "#6b5200", borderRadius: "6px",
  });
  const heading = document.querySelector("h1");
  if (heading) heading.insertAdjacentElement("afterend", notice);
  else document.body.prepend(notice);

  function say(text) {
    notice.textContent = text || "";
    notice.hidden = !text;
    const dim = text ? "0.5" : "";
    document.querySelectorAll("[data-live], [data-live-rows]").forEach((el) => { el.style.opacity = dim; });
  }

  function draw() {
    if (!chart) return;
    chart.setOption({
      animation: false,
      tooltip: { trigger: "axis" },
      legend: { data: ["in", "out"] },
      xAxis: { type: "time" },
      yAxis: { type: "value", name: "msgs/s" },
      series: [
        { name: "in", type: "line", showSymbol: false, data: points.put },
        { name: "out", type: "line", showSymbol: false, data: points.get },
      ],
    });
  }

  // A broker row's cells, in the order and shape of the page's own (templates/clusters/dashboard.html).
  const FIGURES = ["version", "putTps", "getTps", "putToday", "diskUsedPercent", "uptime"];
  const NUMBERS = new Set(["putTps", "getTps", "putToday", "diskUsedPercent"]);

  function cellsOf(broker) {
    const cells = [
      { name: "brokerName", text: broker.brokerName },
      { name: "addr", text: broker.addr, href: broker.configUrl },
      { name: "role", text: broker.role },
    ];
    if (broker.error) cells.push({ name: "error", text: "unknown: " + broker.error, colspan: 6 });
    else FIGURES.forEach((name) => cells.push({ name, text: broker.cells[name], small: name === "uptime" }));
    cells.push({ name: "lastHeartbeat", text: broker.cells.lastHeartbeat });
    return cells;
  }

  function makeCell(cell) {
    const td = document.createElement("td");
    td.dataset.cell = cell.name;
    if (cell.colspan) td.colSpan = cell.colspan;
    if (NUMBERS.has(cell.name)) td.className = "num";
    const inner = cell.href ? document.createElement("a") : cell.small ? document.createElement("small") : null;
    if (inner) {
      if (cell.href) inner.href = cell.href;
      td.appendChild(inner);
    }
    (inner || td).textContent = cell.text;
    return td;
  }

  function fillRow(tr, cells) {
    const same = tr.cells.length === cells.length && cells.every((c, i) => tr.cells[i].dataset.cell === c.name);
    if (!same) {
      tr.replaceChildren(...cells.map(makeCell));
      return;
    }
    cells.forEach((cell, i) => {
      const target = tr.cells[i].firstElementChild || tr.cells[i];
      if (target.textContent !== cell.text) target.textContent = cell.text;
    });
  }

  function table(brokers) {
    const body = document.querySelector("#brokers tbody[data-live-rows]");
    if (!body) return;
    const known = new Map();
    body.querySelectorAll("tr[data-broker]").forEach((tr) => known.set(tr.dataset.broker, tr));
    const rows = brokers.map((broker) => {
      const tr = known.get(broker.addr) || document.createElement("tr");
      tr.dataset.broker = broker.addr;
      tr.classList.toggle("failing", Boolean(broker.error));
      fillRow(tr, cellsOf(broker));
      return tr;
    });
    if (!rows.length) {
      const empty = document.createElement("tr");
      empty.appendChild(Object.assign(document.createElement("td"), { colSpan: 10, textContent: "No broker registered." }));
      rows.push(empty);
      if (body.rows.length === 1 && !body.rows[0].dataset.broker) return;
    }
    rows.forEach((tr, i) => { if (body.rows[i] !== tr) body.insertBefore(tr, body.rows[i] || null); });
    while (body.rows.length > rows.length) body.lastElementChild.remove();
  }

  function show(data) {
    const text = data.text || {};
    document.querySelectorAll("[data-live]").forEach((el) => {
      el.textContent = text[el.dataset.live] || "unknown";
      el.title = data.unreadable && data.unreadable.length ? "not counted: " + data.unreadable.join(", ") : "";
    });
    if (data.rows) table(data.rows);
    const at = data.at || Date.now();
    if (data.putTps !== null) points.put.push([at, data.putTps]);
    if (data.getTps !== null) points.get.push([at, data.getTps]);
    points.put = points.put.slice(-150);
    points.get = points.get.slice(-150);
    draw();
  }

  function expectSoon() {
    clearTimeout(quiet);
    quiet = setTimeout(() => say("Live updates paused: no new figures for 15 seconds. Waiting for the console…"), QUIET_MS);
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}${path}`);
    socket.onopen = expectSoon;
    socket.onmessage = (event) => {
      const data = JSON.parse(event.data);
      retryMs = RETRY_FIRST_MS;
      expectSoon();
      if (data.error) {
        say(`Live updates paused: ${data.error}. The figures below are from the last sample read; trying again every 2 seconds.`);
        return;
      }
      say("");
      show(data);
    };
    socket.onclose = (event) => {
      clearTimeout(quiet);
      if (event.code === 4403) {
        say("Live updates are off: this account may not view this cluster (or its session ended). Sign in again and reload the page.");
        return;
      }
      if (event.code === 4404) {
        say("Live updates are off: the console no longer manages this cluster. Pick a cluster from the start page.");
        return;
      }
      say(`Live updates paused — reconnecting in ${Math.round(retryMs / 1000)} s. The figures below may be out of date.`);
      setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
    };
  }
  connect();
})();
