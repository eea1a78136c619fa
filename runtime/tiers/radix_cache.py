"""G1 for SGLang: a radix tree of cached token runs over a pool of pages (SGLang's RadixCache, v0.5.20).

A node holds a run of whole pages (its edge, as token runs: tiers/token_runs.py)
below its parent; a request's cached prefix is a path from the root.  A request
locks the last node of its path (every node up to the root counts the lock),
so nothing on the path of a running request is evicted.  Eviction takes unlocked
leaves, least recently used first, and a parent whose last child went becomes a
leaf in turn.  Eviction frees pages from the end of a leaf, no more whole pages
than asked: AISimulate's mocker does so (a request readmitted after retraction
on a 200 x 32 pool finds 832 of its 992 prompt tokens), while SGLang v0.5.20
frees the whole leaf; the replay follows AISimulate, its reference.  Matching
walks the tree and
splits a node where a prompt leaves it, so a node always ends on a shared
boundary.  The cost of a match or insert follows the runs and nodes of a
prompt, never its tokens.

Accounting is in tokens (pages times the page size): the tree's tokens, the
requests' private tokens (pages allocated beyond their cached prefix), and what
is left free.  `free_count` and `used_count` are in pages, for the shared
runtime.  While KV events are captured, a recorder hears of every node
inserted and every page evicted (outputs/radix_events.py).
"""
from __future__ import annotations

from heapq import heappop, heappush

from .token_runs import OPEN_END, cut, drop_tail, page_key, shared, spec_cut, spec_runs


class Node:
    __slots__ = ("parent", "children", "runs", "length", "lock", "tick", "key", "depth", "writer", "serial", "hashes")

    def __init__(self, parent, runs: tuple, length: int, key, tick: int, writer=None):
        self.parent = parent
        self.children: dict = {}
        self.runs = runs
        self.length = length
        self.lock = 0
        self.tick = tick
        self.key = key
        self.depth = (parent.depth + parent.length) if parent is not None else 0  # tokens above this node
        self.writer = writer  # the spec of the request whose insert created it (KV events: its session)
        self.serial = tick  # creation order: ties of the LRU order go to the older node, never to an address
        self.hashes = None  # its pages' chained hashes, when KV events are captured (outputs/radix_events.py)


class RadixCache:
    # what the shared runtime reads of a G1 (see tiers/g1.py): no copies to G2 (SGLang has none), no monitor
    proactive_evictions = 0
    ttl_skipped = 0
    on_evict = None
    at = None

    def __init__(self, capacity: int, caching: bool = True, page: int = 1):
        self.capacity = capacity  # pages
        self.caching = caching
        self.page = page
        self.total = capacity * page
        self.root = Node(None, (), 0, None, 0)
        self.root.lock = 1  # never evicted
        self.tree_tokens = 0
        self.evictable = 0  # tokens of unlocked nodes
        self.private = 0  # tokens allocated to requests beyond their cached prefix
        # unlocked leaves by (last use, creation), lazily: an entry whose node has since been used, locked, given a
        # child or evicted is stale and skipped when popped (eviction at page 1 takes a page per decode step, so
        # the order is kept between evictions rather than rebuilt from the tree)
        self.lru: list = []
        self.ticks = 0
        self.evictions = 0  # pages evicted
        self.events: list | None = None  # the replay's list of flushed events, when it captures them
        self.recorder = None  # outputs/radix_events.RadixEvents, which the engine attaches when `events` is set
        self.copying: set = set()
        self.awaited: set = set()

    def set_page(self, page: int) -> None:
        self.page = page
        self.total = self.capacity * page

    # ------------------------------------------------------------------ sizes
    @property
    def available(self) -> int:
        """Tokens neither in the tree nor held by a request."""
        return self.total - self.tree_tokens - self.private

    @property
    def free_count(self) -> int:
        return (self.available + self.evictable) // self.page

    @property
    def used_count(self) -> int:
        return self.capacity - self.free_count

    @property
    def held_blocks(self) -> int:
        """Pages requests hold: their private pages and the locked tree (a timeline's `g1_held_blocks`)."""
        return (self.total - self.available - self.evictable) // self.page

    @property
    def cached_blocks(self) -> int:
        return self.tree_tokens // self.page

    def floor(self, tokens: int) -> int:
        return tokens // self.page * self.page

    def ceil(self, tokens: int) -> int:
        return -(-tokens // self.page) * self.page

    # ------------------------------------------------------------------ walks
    def _tick(self) -> int:
        self.ticks += 1
        return self.ticks

    def match(self, spec, limit: int, start: Node | None = None):
        """(last node, tokens) of the longest cached prefix of `spec`'s tokens in whole pages, at most `limit` tokens.
        Touches the nodes it passes (LRU) and splits the one the prefix ends inside.  `start`, a node known to
        end on that prefix before `limit` (a lease's locked node), saves comparing the runs down to it: its path
        is touched from the root down, as the walk would."""
        node, done = self.root, 0
        limit = self.floor(limit)
        if not self.caching:
            return node, 0
        if start is not None and start is not node:
            path = []
            while start is not node:
                path.append(start)
                start = start.parent
            for child in reversed(path):
                child.tick = self._tick()
                if not child.children and not child.lock:
                    heappush(self.lru, (child.tick, child.serial, child))
            node = path[0]
            done = node.depth + node.length
            if not node.children:  # (nothing below it to compare: the usual insert's new leaf)
                return node, done
            rest = spec_cut(spec, done, OPEN_END)
        else:
            rest = spec_runs(spec)
        page = self.page
        while done < limit:
            child = node.children.get(page_key(rest, page))
            if child is None:
                break
            same, after = shared(child.runs, child.length, rest, min(child.length, limit - done))
            if after is None:
                same = same // page * page
                if same == 0:
                    break
                if same < child.length:
                    child = self._split(child, same)
                after = cut(rest, same, OPEN_END)
            child.tick = self._tick()
            if not child.children and not child.lock:
                heappush(self.lru, (child.tick, child.serial, child))
            node, done, rest = child, done + same, after
        return node, done

    def _split(self, child: Node, at: int) -> Node:
        """Cut `child` after `at` tokens: a new node takes its first part (and its lock count)."""
        parent = child.parent
        head = Node(parent, cut(child.runs, 0, at), at, child.key, child.tick, child.writer)
        head.serial = self._tick()
        head.lock = child.lock
        if child.hashes is not None:
            head.hashes, child.hashes = child.hashes[:at // self.page], child.hashes[at // self.page:]
        parent.children[child.key] = head
        child.runs = cut(child.runs, at, child.length)
        child.length -= at
        child.key = page_key(child.runs, self.page)
        child.parent = head
        child.depth = head.depth + at
        head.children[child.key] = child
        return head

    def insert(self, spec, tokens: int, start: Node | None = None) -> tuple:
        """Put the first `tokens` (whole pages) of `spec`'s tokens in the tree: (tokens it held already, last node).
        `start`: as match's."""
        tokens = self.floor(tokens)
        node, held = self.match(spec, tokens, start)
        if held < tokens:
            rest = spec_cut(spec, held, tokens)
            leaf = Node(node, rest, tokens - held, page_key(rest, self.page), self._tick(), spec)
            node.children[leaf.key] = leaf
            heappush(self.lru, (leaf.tick, leaf.serial, leaf))
            self.tree_tokens += leaf.length
            self.evictable += leaf.length
            if self.recorder is not None:
                self.recorder.stored(leaf)
            node = leaf
        return held, node

    # ------------------------------------------------------------------ locks
    def lock(self, node: Node) -> None:
        while node is not self.root:
            if not node.lock:
                self.evictable -= node.length
            node.lock += 1
            node = node.parent

    def unlock(self, node: Node) -> None:
        while node is not self.root:
            node.lock -= 1
            if not node.lock:
                self.evictable += node.length
                if not node.children:
                    heappush(self.lru, (node.tick, node.serial, node))
            node = node.parent

    # ------------------------------------------------------------------ pages
    def take(self, tokens: int) -> bool:
        """Allocate `tokens` private tokens (page multiples), evicting unlocked cache as needed."""
        if self.available < tokens:
            self.evict(tokens - self.available)
        if self.available < tokens:
            return False
        self.private += tokens
        return True

    def give_back(self, tokens: int) -> None:
        self.private -= tokens

    def own(self, tokens: int) -> None:
        """A request's private tokens just entered the tree (an insert counted them there)."""
        self.private -= tokens

    def evict(self, tokens: int) -> int:
        """Evict pages of unlocked leaves, least recently used first, until `tokens` are freed; returns tokens
        freed."""
        lru, freed = self.lru, 0
        while freed < tokens and lru:
            tick, _, leaf = lru[0]
            if leaf.parent is None or leaf.children or leaf.lock or leaf.tick != tick:
                heappop(lru)  # stale
                continue
            want = self.ceil(tokens - freed)
            if want < leaf.length:  # the leaf's last pages go, the rest stays (see the module's docstring)
                keep = leaf.length - want
                if self.recorder is not None:
                    self.recorder.removed(leaf, keep // self.page)
                    leaf.hashes = leaf.hashes[:keep // self.page]
                leaf.runs = drop_tail(leaf.runs, want)
                leaf.length = keep
                self._forget(want)
                return freed + want
            heappop(lru)
            parent = leaf.parent
            del parent.children[leaf.key]
            leaf.parent = None
            self._forget(leaf.length)
            freed += leaf.length
            if self.recorder is not None:
                self.recorder.removed(leaf, 0)
            if parent is not self.root and not parent.children and not parent.lock:
                heappush(lru, (parent.tick, parent.serial, parent))
        return freed

    def _forget(self, tokens: int) -> None:
        self.tree_tokens -= tokens
        self.evictable -= tokens
        self.evictions += tokens // self.page

    # ------------------------------------------------------------------ what others ask of a G1
    def held_tokens(self, spec, block_size: int, limit: int) -> int:
        """Tokens of `spec`'s prompt cached here (a router's question), at most `limit` pages; touches nothing."""
        node, done, rest, limit = self.root, 0, spec_runs(spec), limit * self.page
        while done < limit and self.caching:
            child = node.children.get(page_key(rest, self.page))
            if child is None:
                break
            same, after = shared(child.runs, child.length, rest, min(child.length, limit - done))
            if after is None:
                same = self.floor(same)
                if same < child.length:
                    done += same
                    break
                after = cut(rest, same, OPEN_END)
            node, rest, done = child, after, done + same
        return done

    def end_copy(self, blocks) -> None:
        """(No copies leave an SGLang G1.)"""
