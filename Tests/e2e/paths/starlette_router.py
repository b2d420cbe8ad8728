"""Path-routing backend: Starlette's router under uvicorn (scope["path"], every escape decoded).

Run as `uvicorn starlette_router:app`. `/api` and everything below it is the "api" handler, every other path
"other"; each answers `{"handler": ..., "path": scope["path"]}`.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route


def handler(name: str):
    async def endpoint(request):
        return JSONResponse({"handler": name, "path": request.scope["path"]})

    return endpoint


app = Starlette(routes=[
    Route("/api", handler("api"), methods=["GET", "POST"]),
    Route("/api/{rest:path}", handler("api"), methods=["GET", "POST"]),
    Route("/{rest:path}", handler("other"), methods=["GET", "POST"]),
])
