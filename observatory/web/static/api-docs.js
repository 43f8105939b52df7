// Starts the vendored Swagger UI on /api/v1/docs. The OpenAPI URL comes from the page's
// #swagger-ui data attribute: the CSP (script-src 'self') allows no inline configuration.
(function () {
  "use strict";
  var root = document.getElementById("swagger-ui");
  if (!root || typeof window.SwaggerUIBundle === "undefined") return;
  // The page carries the document (#openapi-spec): no second request, no "LOADING" while it comes.
  var embedded = document.getElementById("openapi-spec");
  var source = embedded ? { spec: JSON.parse(embedded.textContent) } : { url: root.getAttribute("data-openapi-url") };
  window.SwaggerUIBundle({
    spec: source.spec,
    url: source.spec ? undefined : source.url,
    domNode: root,
    deepLinking: true,
    tryItOutEnabled: false,
    defaultModelsExpandDepth: 0,
  });
})();
