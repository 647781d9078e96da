// Report pages: live progress of a running report (the run's websocket), the tabs (kept in
// the URL, so a copied link opens the same tab and table), the charts (ECharts, from the
// page's JSON), the copy-link button, and sorting the small tables (class "sortable", every
// row on the page) by a click on a heading.  The tables tab's paged table sorts on the
// server instead: its headings are links, so the order covers every page.
(function () {
  const chartsData = document.getElementById("report-charts");
  const data = chartsData ? JSON.parse(chartsData.textContent) : null;
  const drawn = {};

  function draw(box) {
    if (!window.echarts || !data || drawn[box.id]) return;
    const series = data[box.dataset.series] || {};
    const names = Object.keys(series);
    if (!names.length) {
      box.textContent = "Nothing to chart in this period.";
      box.style.height = "auto";
      drawn[box.id] = true;
      return;
    }
    const chart = window.echarts.init(box);
    chart.setOption({
      animation: false,
      tooltip: { trigger: "axis" },
      legend: { type: "scroll", data: names },
      grid: { left: 70, right: 20 },
      xAxis: { type: "time" },
      yAxis: { type: "value", name: box.dataset.unit || "" },
      series: names.map((name) => ({ name, type: "line", showSymbol: false, data: series[name] })),
    });
    drawn[box.id] = chart;
  }

  function show(tab) {
    document.querySelectorAll("[data-tab-panel]").forEach((panel) => {
      panel.hidden = panel.dataset.tabPanel !== tab;
    });
    document.querySelectorAll("#tabs [data-tab]").forEach((link) => {
      link.classList.toggle("active", link.dataset.tab === tab);
    });
    if (tab === "charts") document.querySelectorAll(".chart[data-series]").forEach(draw);
  }

  document.querySelectorAll("#tabs [data-tab]").forEach((link) => {
    link.addEventListener("click", (event) => {
      event.preventDefault();
      const url = new URL(location.href);
      url.searchParams.set("tab", link.dataset.tab);
      history.replaceState(null, "", url);
      show(link.dataset.tab);
    });
  });
  const current = new URL(location.href).searchParams.get("tab");
  if (current) show(current);
  else if (document.querySelector("[data-tab-panel='charts']:not([hidden])")) show("charts");

  // A cell's sort value: its data-sort (raw number, epoch ms) for figures and times, else
  // its text.  Empty values go last whichever the direction.
  function sortValue(cell, numeric) {
    if (!cell) return null;
    const raw = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
    if (raw === "") return null;
    if (!numeric) return raw.toLowerCase();
    const n = Number(raw);
    return Number.isNaN(n) ? null : n;
  }

  function sortTable(table, index, descending) {
    const body = table.tBodies[0];
    if (!body) return;
    const heads = table.tHead.rows[0].cells;
    const numeric = ["int", "float", "time"].includes(heads[index].dataset.kind);
    const rows = Array.from(body.rows).filter((row) => !row.classList.contains("empty"));
    const keyed = rows.map((row, i) => ({ row, i, key: sortValue(row.cells[index], numeric) }));
    keyed.sort((a, b) => {
      if (a.key === null || b.key === null) {
        return a.key === b.key ? a.i - b.i : a.key === null ? 1 : -1;
      }
      const order = numeric ? a.key - b.key : a.key.localeCompare(b.key);
      return (descending ? -order : order) || a.i - b.i;
    });
    keyed.forEach(({ row }) => body.appendChild(row));
    Array.from(heads).forEach((th, i) => {
      th.setAttribute("aria-sort", i === index ? (descending ? "descending" : "ascending") : "none");
    });
  }

  document.querySelectorAll("table.sortable").forEach((table) => {
    Array.from(table.tHead.rows[0].cells).forEach((th, index) => {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "link sort";
      button.title = `sort by ${th.textContent.trim()}`;
      while (th.firstChild) button.appendChild(th.firstChild);
      th.appendChild(button);
      button.addEventListener("click", () => {
        const current = th.getAttribute("aria-sort");
        const figures = ["int", "float", "time"].includes(th.dataset.kind);
        const descending = current === "none" || !current ? figures : current === "ascending";
        sortTable(table, index, descending);
      });
    });
  });

  const copy = document.getElementById("copy-link");
  if (copy) {
    copy.addEventListener("click", async () => {
      const note = document.getElementById("copy-note");
      try {
        await navigator.clipboard.writeText(location.href);
        if (note) note.textContent = "link copied";
      } catch (err) {
        if (note) note.textContent = location.href;  // no clipboard (plain http): show it to copy
      }
    });
  }

  const progress = document.getElementById("progress-card");
  if (progress) {
    const bar = document.getElementById("progress-bar");
    const text = document.getElementById("progress-text");
    const badge = document.getElementById("run-status");
    let finished = false;
    const connect = () => {
      const scheme = location.protocol === "https:" ? "wss" : "ws";
      const socket = new WebSocket(`${scheme}://${location.host}${progress.dataset.ws}`);
      socket.onmessage = (event) => {
        const run = JSON.parse(event.data);
        if (badge) badge.textContent = run.status;
        if (run.stagesTotal) {
          bar.style.width = `${run.percent || 0}%`;
          text.textContent = `${run.stagesDone} of ${run.stagesTotal} Spark stages done`;
        } else {
          text.textContent = `${run.status}: waiting for Spark…`;
        }
        if (run.status === "succeeded" || run.status === "failed") {
          finished = true;
          location.reload();  // the summary, charts and tables (or the error) come with the page
        }
      };
      socket.onclose = () => { if (!finished) setTimeout(connect, 3000); };
    };
    connect();
  }
})();
