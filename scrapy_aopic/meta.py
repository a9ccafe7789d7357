"""The request meta keys scrapy-aopic reads and writes (a leaf module).

Keys the frontier issues to one request (:data:`LEASE`, :data:`KEY`,
:data:`REGISTERED`, :data:`CASH`, :data:`DUPLICATE_OF`,
:data:`DUPLICATE_DISTANCE`) count only for the
request they were issued to; keys a spider sets (:data:`LINK`,
:data:`DEDUP`) are the user's.
"""

#: The lease id of a request the frontier handed out.
LEASE = "aopic_lease"
#: The canonical URL (account key) of a request.
KEY = "aopic_key"
#: A link the frontier already put in its store when its page was visited.
REGISTERED = "aopic_registered"
#: The cash a handed-out request stands for (information only).
CASH = "aopic_cash"
#: Set by a spider to ``False``: the request is not a link and gets no cash.
LINK = "aopic_link"
#: Response meta: the canonical URL of the page this one duplicates.
DUPLICATE_OF = "aopic_duplicate_of"
#: Response meta, with :data:`DUPLICATE_OF`: how many SimHash bits the page
#: differs from the original by (0: the same body or the same words).
DUPLICATE_DISTANCE = "aopic_duplicate_distance"
#: Set by a spider to ``False``: keep the response out of duplicate detection.
DEDUP = "aopic_dedup"
#: The re-crawl change test's verdict for a response.
RECRAWL_CHANGED = "aopic_recrawl_changed"
#: Where another component may leave a SimHash of the page.
SIMHASH = "aopic_simhash"
#: Scrapy's own key: the download slot of a request. Scrapy's downloader
#: writes it on every request it fetches (the host name when the spider set
#: none); a value the spider set is the user's and is kept.
DOWNLOAD_SLOT = "download_slot"
