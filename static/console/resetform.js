// The reset form shows only what the chosen mode uses: the time box for "a time", the
// per-queue offsets for "exact offsets".  Elements carry data-mode="<mode>"; the others
// are hidden and disabled, so a value left in a hidden box is never sent.
(function () {
  const mode = document.getElementById("reset-mode");
  if (!mode) return;
  function show() {
    document.querySelectorAll("#reset-form [data-mode]").forEach((el) => {
      const on = el.dataset.mode === mode.value;
      el.hidden = !on;
      el.querySelectorAll("input").forEach((input) => { input.disabled = !on; });
      if (el.tagName === "INPUT") el.disabled = !on;
    });
  }
  mode.addEventListener("change", show);
  show();
})();
