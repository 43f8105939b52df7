"""Unknown query parameters are refused (400, the one error shape), never silently ignored.

A misspelt filter that is ignored returns plausible, wrong data (``?limit=2`` answering 50
rows), which is worse than an error. ``StrictQueryRoute`` is the route class of every API
router: it learns the query names a route declares (a parameter model's fields count one by
one) and answers any other name with a 400 that lists the allowed ones. Pages parse their
query strings through ``reject_unknown`` with the same message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel

from observatory.web.errors import ApiError, error_response


def unknown_names(given: Iterable[str], allowed: Iterable[str]) -> list[str]:
    allowed = set(allowed)
    return sorted({name for name in given if name not in allowed})


def unknown_message(unknown: list[str], allowed: Iterable[str]) -> str:
    names = ", ".join(repr(n[:40]) for n in unknown[:5])
    return (f"unknown query parameter{'s' if len(unknown) > 1 else ''} {names};"
            f" allowed: {', '.join(sorted(allowed)) or 'none'}")


def reject_unknown(request: Request, allowed: Iterable[str], hidden: Iterable[str] = ()) -> None:
    """Raise a 400 ``ApiError`` if the query string names anything outside ``allowed`` and
    ``hidden`` (names a page's own links set; accepted, but never offered in the message)."""
    allowed = list(allowed)
    unknown = unknown_names(request.query_params.keys(), [*allowed, *hidden])
    if unknown:
        raise ApiError(400, unknown_message(unknown, allowed))


def declared_query_names(route: APIRoute) -> frozenset[str]:
    """Query names a route accepts: plain parameters by alias, parameter models by field alias."""
    names: set[str] = set()
    pending = [route.dependant]
    while pending:
        dependant = pending.pop()
        pending.extend(dependant.dependencies)
        for param in dependant.query_params:
            annotation = getattr(param.field_info, "annotation", None)
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                names.update(field.alias or name for name, field in annotation.model_fields.items())
            else:
                names.add(param.alias)
    return frozenset(names)


class StrictQueryRoute(APIRoute):
    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()
        allowed = declared_query_names(self)

        async def strict(request: Request) -> Response:
            unknown = unknown_names(request.query_params.keys(), allowed)
            if unknown:
                return error_response(400, [unknown_message(unknown, allowed)])
            return await handler(request)

        return strict
