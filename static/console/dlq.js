// The DLQ page's selection: tick rows, the whole page, or "select all" (every stored message,
// on every page); the Resend buttons refuse an empty selection in place, keeping the table.
(function () {
  const form = document.getElementById("resend-form");
  if (!form) return;
  const rows = Array.from(form.querySelectorAll("input[name=msgId]"));
  const pageBox = document.getElementById("select-page");
  const allBox = document.getElementById("select-all");
  const count = document.getElementById("selected-count");
  const problem = document.getElementById("resend-problem");
  const selectable = Number(form.dataset.selectable || 0);

  function refresh() {
    const ticked = rows.filter((box) => box.checked).length;
    if (allBox && allBox.checked) {
      count.textContent = `all ${selectable.toLocaleString("en-US")} selected`;
    } else {
      count.textContent = ticked ? `${ticked.toLocaleString("en-US")} selected` : "None selected";
    }
    if (pageBox) {
      pageBox.checked = rows.length > 0 && ticked === rows.length;
      pageBox.indeterminate = ticked > 0 && ticked < rows.length;
    }
    if (problem && (ticked || (allBox && allBox.checked))) problem.hidden = true;
  }

  if (pageBox) {
    pageBox.addEventListener("change", () => {
      for (const box of rows) box.checked = pageBox.checked;
      if (!pageBox.checked && allBox) allBox.checked = false;
      refresh();
    });
  }
  if (allBox) {
    allBox.addEventListener("change", () => {
      for (const box of rows) box.checked = allBox.checked;
      refresh();
    });
  }
  for (const box of rows) {
    box.addEventListener("change", () => {
      if (!box.checked && allBox) allBox.checked = false;
      refresh();
    });
  }
  form.addEventListener("submit", (event) => {
    const nothing = !rows.some((box) => box.checked) && !(allBox && allBox.checked);
    if (nothing && problem) {
      event.preventDefault();
      problem.hidden = false;
      problem.scrollIntoView({ block: "nearest" });
    }
  });
  refresh();
})();
