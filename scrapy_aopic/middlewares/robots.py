"""robots.txt-aware cash (``docs/hygiene.rst``): disallowed links get no share.

Scrapy's ``RobotsTxtMiddleware`` already fetches and parses each host's
robots.txt (with ``protego`` by default) when the first request for the host
reaches the downloader. :class:`RobotsCashMiddleware` reuses its parsers
rather than fetching again: it listens to Scrapy's ``robots_parsed`` signal
(and falls back to the middleware's own parser table), and from then on

* a link to a disallowed URL of that host gets no share of its page's cash
  and never enters the frontier (frontier link filter, reason ``robots``,
  stat ``aopic/refused/robots``);
* the host's ``Crawl-delay`` becomes its download slot delay.

Links found before the rules arrive are queued as usual; when one is
fetched, Scrapy's middleware refuses it (``IgnoreRequest``) and this
middleware settles its lease with the reason ``robots`` (stat
``aopic/failed/robots``): the cash goes to lambda and the account is marked
refused, so later credits to it go to lambda too.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy.exceptions import IgnoreRequest, NotConfigured

from .. import settings as aopic_settings
from ..hygiene.domains import netloc_of
from ..compat import ROBOTS_PARSED
from ..frontier import Frontier

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.robotstxt import RobotParser

logger = logging.getLogger(__name__)

#: The message of Scrapy's ``IgnoreRequest`` for a disallowed URL.
FORBIDDEN_MESSAGE = "Forbidden by robots.txt"


class RobotsRules:
    """The robots.txt parsers known so far, by canonical host[:port].

    :param user_agent: the user agent robots.txt rules are matched against
        (``ROBOTSTXT_USER_AGENT``, else ``USER_AGENT``, as Scrapy does).
    :param fallback: ``netloc -> parser or None``: parsers known elsewhere
        (Scrapy's middleware), asked for hosts not seen through :meth:`add`.
    """

    def __init__(self, user_agent: str, fallback=None):
        self.user_agent = user_agent
        self.fallback = fallback
        self._parsers: dict[str, RobotParser] = {}

    def __len__(self) -> int:
        return len(self._parsers)

    def add(self, canonical_netloc: str, parser: RobotParser) -> None:
        """Rules of a host are known."""
        self._parsers[canonical_netloc] = parser

    def parser_for(self, url: str, canonical: str) -> RobotParser | None:
        """The parser of ``url``'s host, if its robots.txt is known."""
        parser = self._parsers.get(netloc_of(canonical))
        if parser is None and self.fallback is not None:
            try:
                parser = self.fallback(urlsplit(url).netloc)
            except ValueError:
                return None
        return parser

    def allowed(self, url: str, canonical: str, user_agent: str | None = None) -> bool | None:
        """Whether robots.txt allows ``url``; ``None`` while its rules are
        unknown. A parser that fails counts as allowing (like Scrapy)."""
        parser = self.parser_for(url, canonical)
        if parser is None:
            return None
        try:
            return bool(parser.allowed(url, user_agent or self.user_agent))
        except Exception:  # noqa: BLE001 - a broken robots.txt must not stop a crawl
            return True

    def link_filter(self, url: str, canonical: str, request: Request, depth: int) -> str | None:
        """Frontier link filter: ``"robots"`` for a disallowed URL."""
        if request.meta.get("dont_obey_robotstxt"):
            return None
        agent = request.headers.get(b"User-Agent")
        agent = agent.decode("latin-1") if agent else None
        return "robots" if self.allowed(url, canonical, agent) is False else None


class RobotsCashMiddleware:
    """Downloader middleware: robots.txt rules applied to cash (see module).

    Active only with ``ROBOTSTXT_OBEY``. The add-on puts it at 90, next to
    Scrapy's ``RobotsTxtMiddleware`` (100).
    """

    def __init__(self, crawler: Crawler, frontier: Frontier):
        settings = crawler.settings
        if not settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        self.crawler = crawler
        self.frontier = frontier
        self.stats = crawler.stats
        self.max_crawl_delay = aopic_settings.get_float(settings, "AOPIC_ROBOTS_MAX_CRAWL_DELAY")
        agent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT") or ""
        self.rules = RobotsRules(agent, fallback=self._scrapy_parser)
        self._scrapy_middleware: Any = None
        frontier.link_filters.register(self.rules.link_filter)
        if ROBOTS_PARSED is not None:
            crawler.signals.connect(self._robots_parsed, signal=ROBOTS_PARSED)
        else:
            # Older Scrapy: rules are read from its RobotsTxtMiddleware as it
            # parses them (the fallback above); Crawl-delay needs the signal.
            logger.info(
                "aopic: this Scrapy has no robots_parsed signal (Scrapy 2.18+): robots.txt rules "
                "still guide cash, but Crawl-delay is not applied (AOPIC_ROBOTS_MAX_CRAWL_DELAY ignored)"
            )
            self.stats.set_value("aopic/robots/crawl_delay_unsupported", 1)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RobotsCashMiddleware:
        return cls(crawler, Frontier.from_crawler(crawler))

    # -- Scrapy's parsers ---------------------------------------------------------

    def _find_scrapy_middleware(self) -> Any:
        from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware

        if self._scrapy_middleware is None:
            engine = getattr(self.crawler, "engine", None)
            downloader = getattr(engine, "downloader", None)
            manager = getattr(downloader, "middleware", None)
            for mw in getattr(manager, "middlewares", ()):
                if isinstance(mw, RobotsTxtMiddleware):
                    self._scrapy_middleware = mw
                    break
        return self._scrapy_middleware

    def _scrapy_parser(self, netloc: str) -> RobotParser | None:
        """The parser Scrapy's middleware holds for ``netloc``, once parsed
        (it holds a Deferred while robots.txt is being fetched)."""
        mw = self._find_scrapy_middleware()
        if mw is None:
            return None
        parser = getattr(mw, "_parsers", {}).get(netloc)
        return parser if hasattr(parser, "allowed") else None

    def _robots_parsed(self, robotparser: RobotParser, request: Request, **kwargs) -> None:
        key = self.frontier.canonicalize(request.url)
        if key is None:
            return
        self.rules.add(netloc_of(key), robotparser)
        self.stats.inc_value("aopic/robots/hosts_known")
        if self.max_crawl_delay > 0:
            self._apply_crawl_delay(robotparser, request)

    def _apply_crawl_delay(self, robotparser: RobotParser, request: Request) -> None:
        try:
            delay = robotparser.crawl_delay(self.rules.user_agent)
        except Exception:  # noqa: BLE001 - a broken robots.txt must not stop a crawl
            return
        if not delay or delay <= 0:
            return
        delay = min(float(delay), self.max_crawl_delay)
        engine = getattr(self.crawler, "engine", None)
        downloader = getattr(engine, "downloader", None)
        if downloader is None:
            return
        key = downloader.get_slot_key(request)
        # New slots read per_slot_settings (the slot may be collected when
        # idle and rebuilt later); an existing slot is changed in place.
        per_slot = downloader.per_slot_settings.setdefault(key, {})
        if float(per_slot.get("delay", 0.0)) < delay:
            per_slot["delay"] = delay
        slot = downloader.slots.get(key)
        if slot is not None and slot.delay < delay:
            slot.delay = delay
        self.stats.inc_value("aopic/robots/crawl_delay_hosts")
        logger.debug("aopic: Crawl-delay %.3g s for download slot %s", delay, key)

    # -- refusals at fetch time ---------------------------------------------------

    def process_exception(self, request: Request, exception: Exception, spider: Spider | None = None) -> None:
        if isinstance(exception, IgnoreRequest) and str(exception) == FORBIDDEN_MESSAGE:
            self.frontier.fail(request, "robots", refuse=True)
        return None
