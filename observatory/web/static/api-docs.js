// Starts the vendored Swagger UI on /api/v1/docs. The OpenAPI URL comes from the page's
// #swagger-ui data attribute: the CSP (script-src 'self') allows no inline configuration.
(function () {
  "use strict";
  var root = document.getElementById("swagger-ui");
  if (!root || typeof window.SwaggerUIBundle === "undefined") return;
  window.SwaggerUIBundle({
    url: root.getAttribute("data-openapi-url"),
    domNode: root,
    deepLinking: true,
    tryItOutEnabled: false,
    defaultModelsExpandDepth: 0,
  });
})();
