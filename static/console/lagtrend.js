// A group's lag trend (group page): total lag and seconds behind per topic, per minute,
// from the offset history; the data comes with the page (json_script "lag-trend-data").
(function () {
  const source = document.getElementById("lag-trend-data");
  if (!source || !window.echarts) return;
  const data = JSON.parse(source.textContent);
  document.querySelectorAll(".chart[data-trend]").forEach((box) => {
    const series = data[box.dataset.trend] || {};
    const names = Object.keys(series);
    window.echarts.init(box).setOption({
      animation: false,
      tooltip: { trigger: "axis" },
      legend: { type: "scroll", data: names },
      grid: { left: 70, right: 20 },
      // The axis spans the chosen window (1 h ... 7 d), not just the points drawn.
      xAxis: { type: "time", min: data.since, max: data.until },
      yAxis: { type: "value", name: box.dataset.unit },
      series: names.map((name) => ({ name, type: "line", showSymbol: false, data: series[name] })),
    });
  });
})();
