"""Each route sits with its handler: every row of a resource module's ``ROUTES`` names a
function (never a string) defined in that same module, and the table gathers every
resource's rows once."""

from __future__ import annotations

import inspect

from shardsched.router import routes
from shardsched.router.operation import Operation

RESOURCES = [
    value
    for name, value in vars(routes).items()
    if inspect.ismodule(value) and hasattr(value, "ROUTES")
]


def test_every_route_names_a_handler_of_its_own_module() -> None:
    assert len(RESOURCES) >= 10
    for module in RESOURCES:
        for op in module.ROUTES:
            assert inspect.iscoroutinefunction(op.handler), (module.__name__, op.path)
            assert op.handler.__module__ == module.__name__, (op.method, op.path)
            params = list(inspect.signature(op.handler).parameters)
            assert params == ["cx", "request"], (op.handler.__name__, params)


def test_the_table_is_every_resource_once() -> None:
    gathered: list[Operation] = [op for module in RESOURCES for op in module.ROUTES]
    assert sorted(map(id, gathered)) == sorted(map(id, routes.OPERATIONS))
    keys = [(op.method, op.path) for op in routes.OPERATIONS]
    assert len(keys) == len(set(keys)), "a route listed twice"
    names = [op.name() for op in routes.OPERATIONS]
    assert len(names) == len(set(names)), "two routes with one operationId"
