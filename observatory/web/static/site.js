// Loaded synchronously in <head>: marks that scripts run, so the stylesheet can show
// charts instead of (not as well as) the plain tables readers without scripts get.
document.documentElement.classList.remove("no-js");
document.documentElement.classList.add("js");
