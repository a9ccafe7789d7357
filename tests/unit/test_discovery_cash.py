"""Discovery cash (``AOPIC_DISCOVERY_CASH``, issue 18): every URL first made
known by a visit's links brings a share of a seed's cash, counted as
injected, so the books balance; a ``JOBDIR`` replays it exactly."""

from __future__ import annotations

import logging
import math
import random

import pytest

from scrapy_aopic.engine import AopicEngine
from scrapy_aopic.store import PENDING, Link, MemoryStore
from scrapy_aopic.store.base import Credit, FrontierStore
from scrapy_aopic.store.journal import JournaledStore

SHARE = 0.05


def link(url, host="h"):
    return Link(url, host, 0)


def balanced(engine):
    return engine.conservation_error() <= 1e-9 * max(engine.totals().injected, 1.0)


def test_a_new_url_found_by_a_visit_brings_discovery_cash_a_known_one_does_not():
    engine = AopicEngine(MemoryStore(), seed_cash=2.0, discovery_cash=SHARE)
    engine.add_seed(link("s"))
    engine.add_seed(link("known"))
    lease = engine.next()
    assert lease.url in ("s", "known")
    engine.visit(lease, [link("a"), link("b"), link("s"), link("known")])
    bonus = SHARE * 2.0
    t = engine.totals()
    assert t.injected == pytest.approx(4.0 + 2 * bonus)  # two seeds, two URLs discovered
    assert balanced(engine)
    store = engine.store
    share = 2.0 / 4  # three distinct other links and lambda
    assert store.get("a").cash == pytest.approx(share + bonus)
    assert store.get("b").cash == pytest.approx(share + bonus)
    other = "known" if lease.url == "s" else "s"
    assert store.get(other).cash == pytest.approx(2.0 + share)  # known: no discovery cash
    # The importance denominator counts the cash brought in.
    assert engine.importance_denominator() == pytest.approx(t.history_sum + 4.0 + 2 * bonus)


def test_seeds_registrations_transfers_and_refusals_bring_none():
    engine = AopicEngine(MemoryStore(), discovery_cash=SHARE)
    engine.add_seed(link("s"))
    engine.discover(link("registered"))
    lease = engine.next()
    engine.transfer(lease, link("redirected-to"))  # a redirect's target: not a link found on a page
    assert engine.totals().injected == pytest.approx(1.0)
    engine.store.refuse("refused", "h", 1)
    lease = engine.next()
    assert lease.url == "redirected-to"
    engine.visit(lease, [link("registered"), link("refused"), link("new")])
    assert engine.totals().injected == pytest.approx(1.0 + SHARE)  # "new" only
    assert balanced(engine)


def test_zero_is_off_and_the_engine_rejects_nonsense():
    engine = AopicEngine(MemoryStore())
    engine.add_seed(link("s"))
    engine.visit(engine.next(), [link("a")])
    assert engine.totals().injected == 1.0 and engine.discovery_cash == 0.0
    for bad in (-0.1, math.inf, math.nan):
        with pytest.raises(ValueError):
            AopicEngine(MemoryStore(), discovery_cash=bad)


def test_a_store_without_it_keeps_it_off():
    class Plain(MemoryStore):
        supports_discovery_cash = False
        set_discovery_cash = FrontierStore.set_discovery_cash

    engine = AopicEngine(Plain(), discovery_cash=SHARE)
    assert engine.discovery_cash == 0.0
    engine.add_seed(link("s"))
    engine.visit(engine.next(), [link("a")])
    assert engine.totals().injected == 1.0


def test_compact_rows_books_balance_over_a_long_crawl():
    """Thousands of visits (pending and crawled rows, link memory, lambda's
    visits, revisits): every URL known through a link brought its share."""
    rng = random.Random(5)
    engine = AopicEngine(MemoryStore("pending-cash"), discovery_cash=SHARE, link_memory=True)
    engine.add_seed(link("u0", "h0"))
    for _ in range(3000):
        lease = engine.next()
        if lease is None:
            break
        engine.visit(lease, [link(f"u{rng.randrange(5000)}", f"h{rng.randrange(7)}") for _ in range(rng.randrange(8))])
    t = engine.totals()
    assert t.known > 1000
    assert t.injected == pytest.approx(1.0 + SHARE * (t.known - 1), rel=1e-12)
    assert balanced(engine)


# -- JOBDIR -------------------------------------------------------------------------------------------


def _crawl(engine, rng, steps):
    for _ in range(steps):
        lease = engine.next()
        if lease is None:
            return
        links = [link(f"u{rng.randrange(300)}", f"h{rng.randrange(4)}") for _ in range(1 + rng.randrange(6))]
        if rng.random() < 0.05:
            engine.fail(lease)
        elif rng.random() < 0.05:
            engine.transfer(lease, link(f"u{rng.randrange(300)}"))
        else:
            engine.visit(lease, links, now=0.0)


def _books(store):
    t = store.totals()
    accounts = sorted((v.url, v.state, round(v.cash + v.leased, 12), round(v.history, 12))
                      for v in store.iter_accounts())
    return round(t.injected, 9), round(t.lambda_cash, 9), t.known, accounts


def _reference(steps, seed=3):
    engine = AopicEngine(MemoryStore(), discovery_cash=SHARE, link_memory=True)
    engine.add_seed(link("u0", "h0"))
    _crawl(engine, random.Random(seed), steps)
    return engine


def test_close_and_reopen_gives_the_books_of_an_uninterrupted_run(tmp_path):
    rng = random.Random(3)
    engine = AopicEngine(JournaledStore(tmp_path, roll_entries=50), discovery_cash=SHARE, link_memory=True)
    engine.add_seed(link("u0", "h0"))
    _crawl(engine, rng, 150)
    engine.store.close()
    engine = AopicEngine(JournaledStore(tmp_path), discovery_cash=SHARE, link_memory=True)
    _crawl(engine, rng, 150)
    assert balanced(engine)
    assert _books(engine.store) == _books(_reference(300).store)
    assert engine.totals().injected > 1.0 + 50 * SHARE
    engine.store.close()


def test_killed_then_resumed_replays_the_discovery_cash(tmp_path):
    rng = random.Random(3)
    engine = AopicEngine(JournaledStore(tmp_path, roll_entries=70), discovery_cash=SHARE, link_memory=True)
    engine.add_seed(link("u0", "h0"))
    _crawl(engine, rng, 200)  # no close: the kill
    killed = _books(engine.store)
    engine.store._journal.flush()
    engine.store._lock.release()
    again = JournaledStore(tmp_path)  # replayed before any engine sets the amount
    assert _books(again) == killed
    assert again.discovery_cash == pytest.approx(SHARE)
    engine = AopicEngine(again, discovery_cash=SHARE, link_memory=True)
    _crawl(engine, rng, 100)
    assert balanced(engine)
    assert _books(engine.store) == _books(_reference(300).store)
    engine.store.close()


def test_another_setting_on_resume_is_said_and_the_written_part_replays_as_written(tmp_path, caplog):
    """The JOBDIR was crawled with discovery cash; the resume turns it off.
    The replay brings in what the first run did (not what the resuming run
    asks), the new amount applies from the resume on, is logged, and a
    second resume replays both parts exactly."""
    rng = random.Random(8)
    engine = AopicEngine(JournaledStore(tmp_path), discovery_cash=SHARE)
    engine.add_seed(link("u0", "h0"))
    _crawl(engine, rng, 100)
    engine.store._journal.flush()
    engine.store._lock.release()  # killed: the journal holds the visits
    first = _books(engine.store)
    with caplog.at_level(logging.WARNING, logger="scrapy_aopic.store.journal"):
        resumed = AopicEngine(JournaledStore(tmp_path), discovery_cash=0.0)
    assert _books(resumed.store) == first
    assert "crawled with 0.05 discovery cash per new URL; 0 from this resume on" in caplog.text
    assert resumed.store.discovery_cash_change == (0.05, 0.0)  # the frontier counts it
    injected = resumed.totals().injected
    known = resumed.totals().known
    _crawl(resumed, rng, 100)
    assert resumed.totals().known > known
    assert resumed.totals().injected == injected  # off now: new URLs bring nothing
    assert balanced(resumed)
    second = _books(resumed.store)
    resumed.store._journal.flush()
    resumed.store._lock.release()  # killed again: the journal holds both amounts
    again = AopicEngine(JournaledStore(tmp_path), discovery_cash=0.0).store
    assert _books(again) == second and again.discovery_cash == 0.0
    assert again.discovery_cash_change is None  # resumed with the amount in force
    again.close()


def test_a_replay_entry_with_a_bad_amount_is_refused(tmp_path):
    store = JournaledStore(tmp_path)
    store.set_discovery_cash(0.5)
    store.inject(link("s"), 1.0)
    store._journal.flush()
    store._lock.release()
    journal = next(tmp_path.glob("journal.*.jsonl"))
    journal.write_text(journal.read_text().replace('["discovery",0.5]', '["discovery",-1]'))
    again = JournaledStore(tmp_path)
    assert again.entries_lost == 2 and again.discovery_cash == 0.0 and not again.knows("s")
    again.close()


def test_pending_accounts_of_a_snapshot_keep_the_cash_they_were_brought():
    engine = AopicEngine(MemoryStore(), discovery_cash=SHARE)
    engine.add_seed(link("s"))
    engine.visit(engine.next(), [link("a")])
    header, records = engine.store.snapshot()
    assert header["discovery_cash"] == SHARE
    restored = MemoryStore.restore(header, records)
    assert restored.discovery_cash == SHARE
    assert [v.cash for v in restored.iter_accounts() if v.state == PENDING] == [pytest.approx(0.5 + SHARE)]


# -- a host minting URLs cannot take the free slots with it ---------------------------------------


def minting_host_scenario(store, thaw=False):
    """A site, another host and a link farm (a host whose pages only mint new
    URLs) on ``store`` with 0.5 of discovery cash per URL; returns the
    farm's URLs, all pending. Each farm URL holds its 0.5 and 1/11 of the
    farm page's cash; the site's and the other host's URLs their 0.5 and 1/6
    of the seed's. ``thaw``: the first farm URL is taken and requeued (an
    object, not a compact row, in a memory store)."""
    minted = 0.5
    store.set_discovery_cash(minted)
    store.inject(Link("http://site.test/", "site.test", 0), 1.0)
    lease = store.pop(lambda host: True)
    found = [Link(f"http://site.test/{p}", "site.test", 1) for p in "abc"]
    found += [Link("http://farm.test/0", "farm.test", 1), Link("http://other.test/x", "other.test", 1)]
    assert store.settle_visit(lease.url, lease.lease_id, 1.0, 0.0, [Credit(f, 1.0 / 6) for f in found])
    assert store.get("http://farm.test/0").cash == pytest.approx(1.0 / 6 + minted)
    # The farm's entry page holds what any URL the seed links holds: it passes.
    lease = store.pop(lambda host: host == "farm.test", 0.5)
    assert lease.url == "http://farm.test/0"
    farm = [Link(f"http://farm.test/{i}", "farm.test", 2) for i in range(1, 11)]
    share = lease.cash / 11
    assert store.settle_visit(lease.url, lease.lease_id, lease.cash, 0.0, [Credit(f, share) for f in farm])
    if thaw:
        taken = store.take(farm[0].url)
        assert taken is not None and store.settle_requeue(taken.url, taken.lease_id)
    return [f.url for f in farm]


def held(store):
    return sorted((v.url, round(v.cash, 12)) for v in store.iter_accounts())


@pytest.mark.parametrize("thaw", [False, True])
@pytest.mark.parametrize("make", [lambda tmp: MemoryStore("pending-cash"), lambda tmp: MemoryStore("pending"),
                                  lambda tmp: JournaledStore(tmp)], ids=["pending-cash", "pending", "jobdir"])
def test_a_minting_host_does_not_pass_the_min_share_test_on_its_discovery_cash(tmp_path, make, thaw):
    """The site's host is busy: a free slot goes to another host only if its
    URL holds at least half of the richest URL's cash, both counted beyond
    the discovery cash every URL brought. The farm's URLs hold 0.56 against
    the site's 0.67 (they would pass on their whole cash) but only 0.06 of
    their own against 0.17: they wait; the other host's URL passes."""
    store = make(tmp_path)
    farm = minting_host_scenario(store, thaw)
    assert store.get(farm[0]).cash > 0.5 * store.peek()[1]  # what passed the test before
    not_site = lambda host: host != "site.test"  # noqa: E731
    lease = store.pop(not_site, 0.5)
    assert lease.url == "http://other.test/x"
    store.settle_requeue(lease.url, lease.lease_id)
    before, injected = held(store), store.totals().injected
    assert store.pop(lambda host: host == "farm.test", 0.5) is None
    assert held(store) == before and store.totals().injected == injected  # nothing moved
    assert store.totals().leased == 0
    # With no share to meet, or once the site's URLs are gone, the farm is served.
    lease = store.pop(lambda host: host == "farm.test", 0.0)
    assert lease.url == farm[0]
    store.settle_requeue(lease.url, lease.lease_id)
    for _ in range(4):
        lease = store.pop(lambda host: host != "farm.test", 0.5)
        assert lease.url.startswith(("http://site.test/", "http://other.test/"))
        assert store.settle_visit(lease.url, lease.lease_id, lease.cash, 0.0, [])
    assert store.pop(not_site, 0.5).url == farm[0]
    if isinstance(store, JournaledStore):
        store.close()


def test_the_rule_counts_what_a_url_holds_beyond_its_discovery_cash_not_below():
    """A URL holding less than the discovery cash (a seed brought less, or
    the crawl began without it) counts as holding nothing beyond it: when the
    richest holds nothing beyond it either, any host may take a free slot."""
    store = MemoryStore()
    store.inject(Link("http://a.test/", "a.test", 0), 0.1)
    store.inject(Link("http://b.test/", "b.test", 0), 0.01)
    store.set_discovery_cash(0.5)
    assert store.pop(lambda host: host == "b.test", 0.5).url == "http://b.test/"
