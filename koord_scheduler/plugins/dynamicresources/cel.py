"""CEL device selectors, evaluated as ``k8s.io/dynamic-resource-allocation/cel`` does, on cel-python.

Why cel-python (``celpy``, PyPI ``cel-python``): it is a maintained, pure-Python CEL implementation whose
evaluator is an ordinary class. That lets this module add what Kubernetes' environment needs and no CEL
library on PyPI has: a runtime **cost budget** (the evaluator is subclassed to charge every node it
visits, comprehension iterations included, and to stop at ``CEL_SELECTOR_MAX_COST``), ``cel.bind``, the
namespaced ``sets.*`` / ``strings.*`` calls, Kubernetes' ``quantity`` and ``semver`` values as Python
objects (:mod:`.cel_library`), and ``device.attributes[domain]`` answering an empty map for an unknown
domain. ``common-expression-language`` (Rust bindings) is much faster but converts every value to its own
types (no opaque quantity/semver values, no defaulting map), has no cost accounting and no
``cel.bind``; ``cel-expr-python`` (Google's C++ runtime) type-checks, but cannot hold Python-defined
opaque values and has no cost hook either.

Cost: upstream charges cel-go's per-operation costs; here every evaluated AST node costs 1. Both stop an
expression that runs away (nested comprehensions over long lists) and neither charges a selector that
reads a few attributes anything close to the budget, but the exact figure where an expression is cut
off differs (documented in docs/dra.md).

A compiled selector is checked once for functions the environment does not declare (a compile error, as
cel-go's type checker would give); runtime errors (a missing attribute, a type mismatch, the budget)
come from :meth:`Selector.matches`. Messages never include celpy's dump of the whole activation.
"""

from __future__ import annotations

import functools
from typing import Any

import celpy
import celpy.celtypes as ct
import lark
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, Evaluator

from apis.resource.semver import parse_version
from apis.resource.types import CEL_SELECTOR_MAX_COST, AttributeKind, Device, DeviceAttribute
from koord_scheduler.plugins.dynamicresources import cel_library
from koord_scheduler.plugins.dynamicresources.cel_library import QuantityValue, SemverValue

_MACROS = frozenset({"has", "dyn", "map", "filter", "all", "exists", "exists_one", "reduce", "min"})
_BUILTINS = frozenset(
    {
        "size", "contains", "startsWith", "endsWith", "matches", "type", "int", "uint", "double",
        "string", "bytes", "bool", "duration", "timestamp", "list", "map",
        "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getFullYear", "getMonth",
        "getHours", "getMilliseconds", "getMinutes", "getSeconds",
    }
)  # fmt: skip
_DECLARED = _MACROS | _BUILTINS | frozenset(cel_library.FUNCTIONS)


class CelRuntimeError(Exception):
    """Evaluating a selector failed (CEL's runtime error, or the cost budget)."""


class CostLimitError(CelRuntimeError):
    pass


class _Budget:
    __slots__ = ("limit", "spent")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0


class _CostedEvaluator(Evaluator):
    """celpy's evaluator, charging each visited node to a shared budget and knowing ``cel.bind`` and the
    namespaced library calls."""

    def __init__(self, ast: lark.Tree[Any], activation: Any, budget: _Budget) -> None:
        super().__init__(ast, activation)
        self.budget = budget

    def _visit_tree(self, tree: lark.Tree[Any]) -> Any:
        budget = self.budget
        budget.spent += 1
        if budget.spent > budget.limit:
            raise CostLimitError(f"operation cancelled: actual cost limit exceeded ({budget.limit})")
        return super()._visit_tree(tree)

    def sub_evaluator(self, ast: lark.Tree[Any]) -> Evaluator:
        return _CostedEvaluator(ast, self.activation, self.budget)

    def member_dot_arg(self, tree: lark.Tree[Any]) -> Any:
        namespace = _bare_ident(tree.children[0])
        method = str(tree.children[1])
        if namespace == "cel" and method == "bind":
            return self._bind(tree)
        if namespace in cel_library.NAMESPACES:
            args = self.visit(tree.children[2]) if len(tree.children) > 2 else []
            if isinstance(args, CELEvalError):
                return args
            for arg in args:
                if isinstance(arg, CELEvalError):
                    return arg
            function = cel_library.FUNCTIONS.get(f"{namespace}.{method}")
            if function is None:
                return CELEvalError(f"undeclared reference to '{namespace}.{method}'")
            return function(*args)
        return super().member_dot_arg(tree)

    def _bind(self, tree: lark.Tree[Any]) -> Any:
        """``cel.bind(name, init, body)``: ``body`` with ``name`` bound to ``init`` (cel-go ``ext.Bindings``)."""
        args = tree.children[2] if len(tree.children) > 2 else None
        if not isinstance(args, lark.Tree) or len(args.children) != 3:
            return CELEvalError("cel.bind needs three arguments")
        var_tree, init_tree, body_tree = args.children
        name = _bare_ident(var_tree)
        if name is None:
            return CELEvalError("cel.bind: the first argument must be a simple name")
        value = self.visit(init_tree)
        if isinstance(value, CELEvalError):
            return value
        nested = _CostedEvaluator(body_tree, self.activation, self.budget)
        try:
            return nested.evaluate({name: value})
        except CELEvalError as err:
            return err


def _bare_ident(tree: Any) -> str | None:
    """The name when ``tree`` is nothing but an identifier (``cel`` in ``cel.bind(...)``)."""
    while isinstance(tree, lark.Tree) and len(tree.children) == 1 and tree.data != "ident":
        tree = tree.children[0]
    if isinstance(tree, lark.Tree) and tree.data == "ident" and tree.children:
        return str(tree.children[0])
    return None


def _undeclared(ast: lark.Tree[Any]) -> list[str]:
    names: list[str] = []
    for node in ast.iter_subtrees():
        if node.data == "ident_arg":
            name = str(node.children[0])
        elif node.data == "member_dot_arg":
            namespace = _bare_ident(node.children[0])
            name = str(node.children[1])
            if namespace == "cel" and name == "bind":
                continue
            if namespace in cel_library.NAMESPACES:
                name = f"{namespace}.{name}"
        else:
            continue
        if name not in _DECLARED and name not in names:
            names.append(name)
    return names


_MISSING = object()

Read = tuple[str, ...]
"""What an expression reads of the device: ``("driver",)`` or ``(kind, domain, name)``."""


def _only(tree: Any) -> Any:
    """The one leaf or subtree a chain of single-child rules wraps."""
    while isinstance(tree, lark.Tree) and len(tree.children) == 1:
        tree = tree.children[0]
    return tree


def _string_literal(tree: Any) -> str | None:
    token = _only(tree)
    if isinstance(token, lark.Token) and token.type == "STRING_LIT" and token.value[:1] in "\"'":
        text = str(token.value)
        if len(text) >= 2 and text[0] == text[-1] and "\\" not in text:
            return text[1:-1]
    return None


def _reads(ast: lark.Tree[Any]) -> tuple[Read, ...] | None:
    """The device fields ``ast`` reads, when every use of ``device`` is ``device.driver`` or
    ``device.attributes["domain"].name`` / ``device.capacity["domain"].name`` (a literal domain); None
    otherwise (the whole device then counts)."""
    uses = sum(1 for node in ast.iter_subtrees() if node.data == "ident" and str(node.children[0]) == "device")
    reads: list[Read] = []
    for node in ast.iter_subtrees():
        if node.data != "member_dot":
            continue
        target, name = node.children[0], str(node.children[1])
        if _bare_ident(target) == "device" and name == "driver":
            reads.append(("driver",))
            continue
        index = _only(target)
        if not isinstance(index, lark.Tree) or index.data != "member_index":
            continue
        mapped, key = index.children
        mapped = _only(mapped)
        if not isinstance(mapped, lark.Tree) or mapped.data != "member_dot":
            continue
        if _bare_ident(mapped.children[0]) != "device":
            continue
        field_name = str(mapped.children[1])
        domain = _string_literal(key)
        if field_name in ("attributes", "capacity") and domain is not None:
            reads.append((field_name, domain, name))
    if len(reads) != uses:
        return None
    return tuple(dict.fromkeys(reads))


def read_key(reads: tuple[Read, ...], driver: str, device: Device) -> tuple[object, ...]:
    """The values ``reads`` name on ``device`` (``_MISSING`` where absent): two devices with equal keys
    give an expression with those reads the same result."""
    out: list[object] = []
    for read in reads:
        if read[0] == "driver":
            out.append(driver)
            continue
        kind, domain, name = read
        values: Any = device.attributes if kind == "attributes" else device.capacity
        qualified = f"{domain}/{name}"
        value = values.get(qualified, _MISSING)
        if value is _MISSING and domain == driver:
            value = values.get(name, _MISSING)
        out.append(value if kind == "attributes" or value is _MISSING else value.nanos)
    return tuple(out)


_COMPREHENSIONS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_UNKNOWN_SIZE = 64
"""The size assumed for a collection the estimator cannot bound better: a device's maps hold at most
32 entries (``ResourceSliceMaxAttributesAndCapacitiesPerDevice``) and its strings 64 characters
(``DeviceAttributeMaxValueLength``), so lists built from them stay within this."""


def _collection_size(tree: Any) -> int:
    node = _only(tree)
    if isinstance(node, lark.Tree) and node.data == "list_lit":
        items = node.children[0] if node.children else None
        return len(items.children) if isinstance(items, lark.Tree) else 0
    if isinstance(node, lark.Tree) and node.data == "member_dot_arg" and str(node.children[1]) in ("map", "filter"):
        return _collection_size(node.children[0])
    return _UNKNOWN_SIZE


def estimated_cost(tree: Any) -> int:
    """A worst-case bound of :class:`_CostedEvaluator`'s charge for ``tree`` (one per node visited, each
    comprehension's body once per element of the largest collection it may see), in the spirit of
    cel-go's estimator, which the API server applies to selectors before storing them."""
    if not isinstance(tree, lark.Tree):
        return 0
    if tree.data == "member_dot_arg" and str(tree.children[1]) in _COMPREHENSIONS and len(tree.children) > 2:
        args = tree.children[2]
        body = args.children[-1] if isinstance(args, lark.Tree) and args.children else None
        size = _collection_size(tree.children[0])
        return 1 + estimated_cost(tree.children[0]) + size * (estimated_cost(body) + 2)
    return 1 + sum(estimated_cost(child) for child in tree.children)


class _DefaultingMap(ct.MapType):
    """``device.attributes`` / ``device.capacity``: an unknown domain reads as an empty map (upstream's
    ``newStringInterfaceMapWithDefault``); an unknown name inside a domain is still an error."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return ct.MapType()


@functools.cache
def environment() -> celpy.Environment:
    """The one CEL environment, built when the first selector is compiled: building it constructs
    celpy's LALR parser (about 0.1 CPU-second, several times that under a profiler), which a scheduler
    that never sees a DRA claim with a CEL selector should not pay at start-up."""
    return celpy.Environment()


class Selector:
    """One compiled CEL selector. ``error`` is the compile error (the selector then never matches)."""

    __slots__ = ("_activation", "ast", "error", "expression", "memo", "reads")

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.error = ""
        self.ast: lark.Tree[Any] | None = None
        self._activation: Any = None
        self.reads: tuple[Read, ...] | None = None
        """What the expression reads of a device, when only named fields (see :func:`read_key`)."""
        self.memo: dict[tuple[object, ...], bool | str] = {}
        """Outcomes by :func:`read_key` (bounded): devices that look the same to the expression."""
        try:
            self.ast = environment().compile(expression)
        except CELParseError as err:
            where = f"<input>:{err.line}:{err.column}" if err.line is not None else "<input>"
            self.error = f"compilation failed: ERROR: {where}: syntax error in {expression!r}"
            return
        except Exception as err:  # a grammar the parser rejects in another way
            self.error = f"compilation failed: {type(err).__name__}: {err}"
            return
        missing = _undeclared(self.ast)
        if missing:
            self.error = "compilation failed: " + ", ".join(f"undeclared reference to {n!r}" for n in missing)
            return
        cost = estimated_cost(self.ast)
        if cost > CEL_SELECTOR_MAX_COST:
            self.error = (
                f"compilation failed: estimated cost {cost} exceeds the budget of {CEL_SELECTOR_MAX_COST} "
                "(CELSelectorExpressionMaxCost)"
            )
            return
        self._activation = environment().program(self.ast, functions=cel_library.FUNCTIONS).new_activation()
        self.reads = _reads(self.ast)

    def matches(self, device: ct.MapType, *, cost_limit: int = CEL_SELECTOR_MAX_COST) -> bool:
        """Evaluate against ``device`` (:func:`device_value`). Raises :class:`CelRuntimeError`."""
        if self.error or self.ast is None:
            raise CelRuntimeError(self.error)
        evaluator = _CostedEvaluator(self.ast, self._activation, _Budget(cost_limit))
        try:
            result = evaluator.evaluate({"device": device})
        except CELEvalError as err:
            raise CelRuntimeError(describe_eval_error(err)) from None
        except CostLimitError:
            raise
        except RecursionError:
            raise CelRuntimeError("expression nested too deeply") from None
        if not isinstance(result, ct.BoolType):
            raise CelRuntimeError(f"must evaluate to bool, got {_type_name(result)}")
        return bool(result)


def _type_name(value: Any) -> str:
    if isinstance(value, QuantityValue):
        return "Quantity"
    if isinstance(value, SemverValue):
        return "Semver"
    return type(value).__name__.replace("Type", "").lower() or "unknown"


def describe_eval_error(err: CELEvalError) -> str:
    """celpy's error as one line, without the activation dump some messages carry."""
    message = str(err.args[0]) if err.args else "evaluation error"
    cut = message.find(" (in activation")
    if cut >= 0:
        message = message[:cut]
    detail = err.args[2] if len(err.args) > 2 else None
    if message in {"no such key", "no such member", "no such overload"} and detail:
        message = f"{message}: {', '.join(str(d) for d in detail)}"
    return message


def _attribute_value(attribute: DeviceAttribute) -> Any:
    kind, value = attribute.kind, attribute.value
    if kind is AttributeKind.INT:
        return ct.IntType(int(value))
    if kind is AttributeKind.BOOL:
        return ct.BoolType(bool(value))
    if kind is AttributeKind.STRING:
        return ct.StringType(str(value))
    return SemverValue(parse_version(str(value)))


def _split_name(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def device_value(driver: str, device: Device) -> ct.MapType:
    """The ``device`` variable: ``driver``, and ``attributes`` / ``capacity`` by domain then name (short
    names under the driver's domain)."""
    attributes: dict[str, ct.MapType] = {}
    for name, attribute in device.attributes.items():
        domain, ident = _split_name(name, driver)
        attributes.setdefault(domain, ct.MapType())[ct.StringType(ident)] = _attribute_value(attribute)
    capacity: dict[str, ct.MapType] = {}
    for name, quantity in device.capacity.items():
        domain, ident = _split_name(name, driver)
        value: Any = QuantityValue(quantity.nanos, quantity.text)
        capacity.setdefault(domain, ct.MapType())[ct.StringType(ident)] = value
    return ct.MapType(
        {
            ct.StringType("driver"): ct.StringType(driver),
            ct.StringType("attributes"): _DefaultingMap({ct.StringType(k): v for k, v in attributes.items()}),
            ct.StringType("capacity"): _DefaultingMap({ct.StringType(k): v for k, v in capacity.items()}),
        }
    )
