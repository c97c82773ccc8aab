// A pinned number's note (standarderror_book/sphinxext/pins.py: render_pins; book.css shows it on
// hover and on keyboard focus): Escape closes the open note and keeps it closed until the
// pointer leaves the number and focus leaves it, as a tooltip must be dismissable without
// moving (WCAG 1.4.13).
(() => {
  const wraps = () => document.querySelectorAll(".se-pin-wrap");
  document.addEventListener("keydown", event => {
    if (event.key !== "Escape") return;
    wraps().forEach(w => {
      if (w.matches(":hover, :focus-within")) w.classList.add("se-pin-dismissed");
    });
  });
  const reopen = event => {
    const w = event.currentTarget;
    if (!w.matches(":hover") && !w.contains(event.relatedTarget)) {
      w.classList.remove("se-pin-dismissed");
    }
  };
  // A note that would run past the right edge of the window opens leftwards instead.
  const place = event => {
    const note = event.currentTarget.querySelector(".se-pin-note");
    if (!note) return;
    note.classList.remove("se-pin-flip");
    if (note.getBoundingClientRect().right > document.documentElement.clientWidth) {
      note.classList.add("se-pin-flip");
    }
  };
  const setup = () => wraps().forEach(w => {
    w.addEventListener("mouseleave", reopen);
    w.addEventListener("focusout", reopen);
    w.addEventListener("mouseenter", place);
    w.addEventListener("focusin", place);
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setup);
  } else {
    setup();
  }
})();
