"""Symbolic sizes of one fusion definition.

Every non-broadcast dim of a defined input gets a size symbol (a ``sympy.Symbol``), unless it is
declared static (an ``int``). Ops that line dims up (pointwise operands, ``broadcast_in_dim``
targets) *unify* their sizes, as nvFuser does with symbolic extents: two anonymous symbols
become one, a symbol lined up with a static size becomes that size. Named sizes (``"N"``) are
declarations: two different names, or a name and a static size, never unify, and lining them
up is a definition error. At execution every input dim is checked against its size.

For shape and dtype inference the table gives each symbol a *representative* value, a prime
distinct from every other representative and from every static size, so that PyTorch's meta
functions can run on ``device="meta"`` tensors and their result sizes map back to symbols.
"""
from __future__ import annotations

import re
from typing import Any

import sympy

Size = Any  # int | sympy.Expr

_ANONYMOUS = re.compile(r"s\d+$")


class SizeMismatch(Exception):
    """Two sizes cannot be the same size; the message says why."""


def _is_prime(n: int) -> bool:
    return n > 1 and all(n % p for p in range(2, int(n ** 0.5) + 1))


class SizeTable:
    """The size symbols of one definition, their unification and representative values."""

    def __init__(self) -> None:
        self._parent: dict[sympy.Symbol, Any] = {}  # symbol -> symbol or int (union-find)
        self._named: set[sympy.Symbol] = set()
        self._by_name: dict[str, sympy.Symbol] = {}
        self._representative: dict[sympy.Symbol, int] = {}
        self._statics: set[int] = set()
        # the next candidate for a representative, an int: a generator would make an open
        # definition impossible to copy (``copy.deepcopy``)
        self._next_candidate = 5
        self._count = 0

    # ----------------------------------------------------------------- creation
    def new(self, name: str | None = None) -> sympy.Symbol:
        """A fresh anonymous symbol, or the symbol of the named size ``name``.

        Raises:
            ValueError: ``name`` looks like an anonymous symbol (``s3``).
        """
        if name is not None:
            if _ANONYMOUS.match(name):
                raise ValueError(f"size name {name!r} is reserved for anonymous sizes")
            if name in self._by_name:
                return self._by_name[name]
            sym = sympy.Symbol(name, integer=True, positive=True)
            self._by_name[name] = sym
            self._named.add(sym)
        else:
            sym = sympy.Symbol(f"s{self._count}", integer=True, positive=True)
            self._count += 1
        self._parent[sym] = sym
        return sym

    def declare_static(self, n: int) -> None:
        """Note a static size, so that no representative equals it."""
        if n <= 1 or n in self._statics:
            return
        self._statics.add(n)
        for sym, rep in list(self._representative.items()):
            if rep == n:
                self._representative[sym] = self._next_prime()

    def _next_prime(self) -> int:
        used = set(self._representative.values())
        while True:
            p = self._next_candidate
            self._next_candidate += 1
            if _is_prime(p) and p not in self._statics and p not in used:
                return p

    # ----------------------------------------------------------------- unification
    def find(self, size: Size) -> Size:
        """The canonical form of a size: an ``int``, or an expression in root symbols."""
        if isinstance(size, int):
            return size
        size = sympy.sympify(size)
        if size.is_Integer:
            return int(size)
        if isinstance(size, sympy.Symbol):
            parent = self._parent.get(size, size)
            if parent == size:
                return size
            root = self.find(parent)
            self._parent[size] = root
            return root
        result = size.xreplace({s: sympy.sympify(self.find(s)) for s in size.free_symbols})
        return int(result) if result.is_Integer else result

    def unify(self, a: Size, b: Size) -> Size:
        """Make ``a`` and ``b`` one size (neither is a broadcast 1); returns it.

        An anonymous symbol gives way to the other size; named sizes, static sizes and sizes
        computed from other sizes do not.

        Raises:
            SizeMismatch: the two sizes are fixed and differ.
        """
        ra, rb = self.find(a), self.find(b)
        if _same(ra, rb):
            return ra

        def gives_way(x) -> bool:
            return isinstance(x, sympy.Symbol) and x not in self._named

        if gives_way(rb) and rb not in getattr(sympy.sympify(ra), "free_symbols", ()):
            loser, winner = rb, ra
        elif gives_way(ra) and ra not in getattr(sympy.sympify(rb), "free_symbols", ()):
            loser, winner = ra, rb
        else:
            raise SizeMismatch(f"{_describe(ra, self)} vs {_describe(rb, self)}")
        self._parent[loser] = winner
        self._representative.pop(loser, None)
        return winner

    def canonical_map(self) -> dict:
        """``{symbol: canonical size}`` for every symbol that is not its own root."""
        out = {}
        for sym in self._parent:
            root = self.find(sym)
            if root != sym:
                out[sym] = sympy.Integer(root) if isinstance(root, int) else root
        return out

    def is_named(self, sym: sympy.Symbol) -> bool:
        return sym in self._named

    # ----------------------------------------------------------------- representatives
    def representative(self, size: Size) -> int:
        """The size evaluated with every symbol at its representative value."""
        size = self.find(size)
        if isinstance(size, int):
            return size
        values = {}
        for s in size.free_symbols:
            if s not in self._representative:
                self._representative[s] = self._next_prime()
            values[s] = self._representative[s]
        return int(size.xreplace(values))

    def from_representative(self, n: int) -> Size:
        """The size whose representative value is ``n`` (a root symbol, or ``n`` itself)."""
        n = int(n)
        if n == 1 or n in self._statics:
            return n
        for sym, rep in self._representative.items():
            if rep == n and self.find(sym) == sym:
                return sym
        return n


def _describe(size: Size, table: "SizeTable") -> str:
    if isinstance(size, int):
        return f"static size {size}"
    if isinstance(size, sympy.Symbol):
        return f"named size {size}" if table.is_named(size) else f"size {size}"
    return f"size {size}"


def _same(a: Size, b: Size) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return sympy.sympify(a) == sympy.sympify(b)


def evaluate(size: Size, values: dict) -> Any:
    """Evaluate a size expression with ``values`` (``symbol -> int or SymInt``) using Python
    arithmetic, so that traced sizes (SymInts) stay symbolic.

    Raises:
        KeyError: a symbol has no value.
        NotImplementedError: the expression uses an operation other than ``+``, ``*`` and
            integer powers.
    """
    if isinstance(size, int):
        return size
    if size.is_Integer:
        return int(size)
    if isinstance(size, sympy.Symbol):
        return values[size]
    if isinstance(size, sympy.Add):
        total = 0
        for term in size.args:
            total = total + evaluate(term, values)
        return total
    if isinstance(size, sympy.Mul):
        numerator, denominator = 1, 1
        for factor in size.args:
            if isinstance(factor, sympy.Pow) and factor.exp.is_Integer and factor.exp < 0:
                denominator = denominator * evaluate(factor.base ** -factor.exp, values)
            else:
                numerator = numerator * evaluate(factor, values)
        return numerator if isinstance(denominator, int) and denominator == 1 else numerator // denominator
    if isinstance(size, sympy.Pow) and size.exp.is_Integer and size.exp > 0:
        result = 1
        base = evaluate(size.base, values)
        for _ in range(int(size.exp)):
            result = result * base
        return result
    raise NotImplementedError(f"size expression {size}")
