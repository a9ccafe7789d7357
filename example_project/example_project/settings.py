"""Settings of the example project: a polite, fast broad crawl with AOPIC.

Only the ``ADDONS`` line is needed for scrapy-aopic; the rest are Scrapy's
usual broad-crawl settings, tuned for the bundled local demo site (short
timeouts, few retries). Every ``AOPIC_*`` setting has a documented default
(see docs/settings); a few are set here to show where they go.
"""

BOT_NAME = "example_project"
SPIDER_MODULES = ["example_project.spiders"]
NEWSPIDER_MODULE = "example_project.spiders"

# The one line that switches scrapy-aopic on.
ADDONS = {"scrapy_aopic.Addon": 0}

# AOPIC_SEED_CASH = 1.0             # cash each seed brings
# AOPIC_LAMBDA_TAX = None           # lambda is one more out-link (as in the paper)
# AOPIC_LAMBDA_TARGETS = "pending"  # lambda feeds pages not yet fetched
# AOPIC_EXPORT_IMPORTANCE = "importance.jsonl"  # importance ranking at close

# Polite but fast on a local site.
USER_AGENT = "example_project (+https://github.com/scrapy-aopic/scrapy-aopic)"
ROBOTSTXT_OBEY = True
CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 4
DOWNLOAD_DELAY = 0
DOWNLOAD_TIMEOUT = 5
RETRY_TIMES = 1

# Broad-crawl recommendations from Scrapy's docs: no cookies (session
# cookies are per site and useless across thousands of hosts), no redirect
# loops beyond a few hops, no telnet console.
COOKIES_ENABLED = False
REDIRECT_MAX_TIMES = 5
TELNETCONSOLE_ENABLED = False
REACTOR_THREADPOOL_MAXSIZE = 10

LOG_LEVEL = "INFO"
FEED_EXPORT_ENCODING = "utf-8"
