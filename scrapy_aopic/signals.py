"""Signals sent by scrapy-aopic (connect with ``crawler.signals.connect``)."""

#: A page was visited and paid its cash out.
#: Arguments: ``url`` (canonical), ``links`` (canonical URLs that got a share),
#: ``lease`` (:class:`~scrapy_aopic.store.base.Lease`: cash, depth, history
#: before the visit), ``response``, ``spider``.
page_visited = object()

#: The frontier is about to close its store (sent from the scheduler's
#: ``close``, before ``spider_closed``): the last moment its accounts can be
#: read, also from a remote store. Arguments: ``frontier``, ``reason``.
frontier_closing = object()

#: The crawl cannot use its ``JOBDIR`` (damaged, or held by another process;
#: sent from the scheduler's ``open``, before ``spider_opened``): the crawl
#: closes at once, and a component that keeps state in the ``JOBDIR`` must
#: neither read it nor write it (it would overwrite a state it never
#: loaded, or the live crawl's). Arguments: ``reason`` (``jobdir_damaged``,
#: ``jobdir_in_use``).
jobdir_refused = object()
