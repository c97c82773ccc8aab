// A link inside the title of a collapsible box (a solution's "Solution to Exercise 1.1") is
// followed without the box's toggle seeing the click: sphinx-togglebutton listens on the whole
// title and, for a click on anything but its own button, fails with "button is not defined".
(() => {
  const setup = () => {
    document.querySelectorAll(".admonition-title a, summary a").forEach(link => {
      link.addEventListener("click", event => event.stopPropagation());
    });
  };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setup);
  } else {
    setup();
  }
})();
