// Live cluster figures: numbers and a TPS chart fed by the console's websocket
// (/ws/clusters/<cluster>/live/), which pushes the brokers' totals every two seconds.
(function () {
  const script = document.currentScript;
  const path = script.dataset.ws;
  const chartBox = document.getElementById("tps-chart");
  const chart = chartBox && window.echarts ? window.echarts.init(chartBox) : null;
  const points = { put: [], get: [] };

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

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}${path}`);
    socket.onmessage = (event) => {
      const data = JSON.parse(event.data);
      document.querySelectorAll("[data-live]").forEach((el) => {
        const value = data[el.dataset.live];
        el.textContent = value === null || value === undefined ? "unknown" : String(value);
        el.title = data.unreadable && data.unreadable.length ? "not counted: " + data.unreadable.join(", ") : "";
      });
      const at = data.at || Date.now();
      if (data.putTps !== null) points.put.push([at, data.putTps]);
      if (data.getTps !== null) points.get.push([at, data.getTps]);
      points.put = points.put.slice(-150);
      points.get = points.get.slice(-150);
      draw();
    };
    socket.onclose = () => setTimeout(connect, 3000);
  }
  connect();
})();
