// Applies the saved light/dark choice before the page paints.
(function () {
  var t = localStorage.getItem("kagzi-theme");
  if (t) document.documentElement.setAttribute("data-theme", t);
})();
