"""Signals sent by scrapy-aopic (connect with ``crawler.signals.connect``)."""

#: A page was visited and paid its cash out.
#: Arguments: ``url`` (canonical), ``links`` (canonical URLs that got a share),
#: ``lease`` (:class:`~scrapy_aopic.store.base.Lease`: cash, depth, history
#: before the visit), ``response``, ``spider``.
page_visited = object()
