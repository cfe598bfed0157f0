"""The finance vocabulary tool search understands: stopwords, word forms, synonyms, entities and out-of-scope subjects.

Plain data, lower case, read by `progressive_mcp.search.index` when an index is built; nothing here depends on a spec.
Words are written as people type them; the index runs them through the same normalisation as tool texts. Example::

    "eps" in SYNONYMS            # True: a query saying EPS also looks for "earnings"
    "tsla" in TICKERS            # True: a lower-case ticker is an entity, not a topic
"""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Function words and filler that say nothing about which tool is wanted. Words that do (today, daily, history,
# intraday, list, put, most) are not here: "today's movers", "put/call", "most active" need them.
STOPWORDS = _words(
    """
    a about above across after again against ago all almost also am an and any anything are around as at away back
    be been before being below between both but by can care could did do does doing done dont during each either
    else entire etc even ever every few for from get gets getting give given go going got had has have having he
    her here hers him his how however i if in into is it its itself just kind kinds know let lets like look looking
    make many me might mine more much must my myself near nearby need needs no nor not of off on once one only or
    other our ours out over own please pull really same see shall she should show so some something such tell than
    thank thanks that the their theirs them then there these they thing things this those through thru to too u
    under until up upon versus very via vs want wanted was way we well were what whats when where whether which
    while who whom whose why will wish with within without whole would yes yet you your yours yourself im ive id
    youre hows wheres theres thats pls plz kindly fetch find gimme grab info information data details detail number
    numbers figure figures stuff moment possible able maybe using use used called named
    """
)
# Words that only place a question in time; dropped so that "last month" does not pull the monthly tools. (A month
# name or "yesterday" still tells `search` that a past date is meant.)
TIME_FILLER = _words(
    """
    yesterday yesterdays tomorrow tonight morning evening afternoon night lately recently recent january february
    march april may june july august september october november december jan feb mar apr jun jul aug sep sept oct
    nov dec monday tuesday wednesday thursday friday saturday sunday last past since until till far
    """
)
# Month names as dates ("may" is left out: it is mostly the verb).
MONTHS = _words("january february march april june july august september october november december") | _words(
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
# Words asking for the value at this moment ("right now", "live", "latest"): a light hint towards quotes, spot
# prices and current rates, never enough to pick a tool alone.
NOW_WORDS = _words("now current currently latest live realtime instant instantly present right")

# Spellings, short forms and irregular verbs, mapped to one form before stemming (in tool texts and queries alike).
WORD_FORMS: dict[str, str] = {
    "aluminium": "aluminum",
    "labour": "labor",
    "indices": "index",
    "indexes": "index",
    "avg": "average",
    "mkt": "market",
    "px": "price",
    "qtr": "quarter",
    "qtrly": "quarterly",
    "yr": "year",
    "yrs": "year",
    "min": "minute",
    "mins": "minute",
    "hr": "hour",
    "hrs": "hour",
    "wk": "week",
    "wks": "week",
    "mo": "month",
    "mos": "month",
    "calender": "calendar",
    "divs": "dividend",
    "treasuries": "treasury",
    "cryptos": "crypto",
    "cryptocurrencies": "cryptocurrency",
    "bitcoins": "bitcoin",
    "ytd": "year",
    "yoy": "annual",
    "annually": "annual",
    "yearly": "annual",
    "postmarket": "afterhours",
    "sold": "sell",
    "bought": "buy",
    "paid": "pay",
    "pays": "pay",
    "spent": "spend",
    "rose": "rise",
    "risen": "rise",
    "fell": "fall",
    "fallen": "fall",
    "grew": "grow",
    "grown": "grow",
    "held": "hold",
    "holds": "hold",
    "lost": "lose",
    "beaten": "beat",
    "sank": "sink",
    "sunk": "sink",
    "shrank": "shrink",
    "shrunk": "shrink",
}

# Time-unit words as they follow a number ("5min", "10y", "60d") or a "per"/"each"/"by" ("day by day").
UNIT_WORDS: dict[str, str] = {
    "m": "minute",
    "min": "minute",
    "mins": "minute",
    "minute": "minute",
    "minutes": "minute",
    "h": "hour",
    "hr": "hour",
    "hrs": "hour",
    "hour": "hour",
    "hours": "hour",
    "d": "day",
    "day": "day",
    "days": "day",
    "w": "week",
    "wk": "week",
    "week": "week",
    "weeks": "week",
    "mo": "month",
    "month": "month",
    "months": "month",
    "q": "quarter",
    "quarter": "quarter",
    "quarters": "quarter",
    "y": "year",
    "yr": "year",
    "yrs": "year",
    "year": "year",
    "years": "year",
}
# "each day", "day by day", "per week": the adjective the catalog uses for that spacing.
SPACING_WORDS: dict[str, str] = {
    "minute": "intraday",
    "hour": "hourly",
    "day": "daily",
    "week": "weekly",
    "month": "monthly",
    "quarter": "quarterly",
    "year": "annual",
}

# Query word -> words a tool text may use for the same idea. A query term brings its synonyms in at a lower weight
# (`search.SYNONYM_FACTOR`); a tool matching the word itself and a synonym counts once, for the better of the two.
SYNONYMS: dict[str, tuple[str, ...]] = {
    # prices and series
    "price": ("quote", "prices"),
    "cost": ("price",),
    "costs": ("price",),
    "worth": ("price", "value"),
    "trading": ("trade", "price", "quote"),
    "trade": ("price", "quote"),
    "quote": ("price",),
    "quotes": ("quote", "price"),
    "candles": ("ohlcv", "bars", "candle"),
    "candle": ("ohlcv", "bars"),
    "candlestick": ("ohlcv", "bars", "candle"),
    "bars": ("ohlcv", "candles"),
    "bar": ("ohlcv", "candles"),
    "ohlc": ("ohlcv", "open", "close", "candles"),
    "ohlcv": ("ohlc", "open", "close", "candles"),
    "chart": ("history", "series", "prices"),
    "history": ("historical", "series"),
    "historical": ("history", "past"),
    "hourly": ("intraday", "60min", "hour"),
    "hour": ("intraday", "hourly"),
    "minute": ("intraday", "1min"),
    "intraday": ("minute", "today"),
    "eod": ("daily", "close"),
    "close": ("closing",),
    "closing": ("close",),
    "closes": ("close",),
    "afterhours": ("extended", "hours", "intraday", "after"),
    "premarket": ("extended", "hours", "intraday", "pre"),
    "session": ("trading", "day"),
    "move": ("change", "percent"),
    "moved": ("change",),
    "change": ("percent", "move"),
    # companies and stocks
    "stock": ("stocks", "share", "shares"),
    "stocks": ("stock", "share"),
    "equity": ("stock", "share"),
    "equities": ("stock", "equity"),
    "share": ("stock", "shares"),
    "shares": ("stock", "share"),
    "ticker": ("symbol", "tickers"),
    "tickers": ("ticker", "symbol"),
    "symbol": ("ticker",),
    "company": ("firm", "corporate"),
    "firm": ("company",),
    "corporation": ("company",),
    "business": ("company",),
    "profile": ("overview",),
    # fundamentals
    "eps": ("earnings", "per", "share"),
    "pe": ("ratio", "valuation", "earnings"),
    "valuation": ("ratio",),
    "cap": ("capitalization", "market"),
    "capitalization": ("cap",),
    "revenue": ("sales", "income"),
    "revenues": ("revenue",),
    "sales": ("revenue",),
    "profit": ("income", "earnings"),
    "profits": ("profit", "income"),
    "earn": ("earnings", "income"),
    "earned": ("earnings", "income"),
    "earnings": ("eps",),
    "income": ("earnings", "profit"),
    "debt": ("liabilities", "borrowings"),
    "liabilities": ("debt", "liability"),
    "fcf": ("free", "cash", "flow"),
    "capex": ("capital", "expenditure", "expenditures"),
    "buyback": ("buybacks", "repurchase"),
    "buybacks": ("buyback", "repurchase"),
    "repurchase": ("buyback",),
    "repurchases": ("buyback",),
    "dividend": ("dividends", "payout"),
    "dividends": ("dividend", "payout"),
    "payout": ("dividend",),
    "pay": ("paid", "payment", "payout"),
    "forecast": ("estimate", "estimates", "expectations"),
    "forecasts": ("estimate", "forecast"),
    "expect": ("estimate", "forecast"),
    "expecting": ("estimate", "forecast"),
    "expected": ("estimate", "forecast", "upcoming"),
    "expectations": ("estimate", "forecast"),
    "estimate": ("estimates", "forecast", "consensus"),
    "estimates": ("estimate", "forecast", "consensus"),
    "consensus": ("estimate",),
    "analyst": ("analysts", "estimate"),
    "analysts": ("analyst", "estimate"),
    "upcoming": ("next", "calendar", "coming"),
    "schedule": ("calendar", "date"),
    "report": ("reports", "release"),
    "split": ("splits",),
    "splits": ("split",),
    "delisted": ("delisting", "listing"),
    "listed": ("listing",),
    "ipo": ("ipos", "offering", "listing"),
    "filing": ("report",),
    # news and people
    "news": ("headlines", "articles", "sentiment"),
    "headlines": ("news",),
    "headline": ("news",),
    "articles": ("news",),
    "article": ("news",),
    "press": ("news", "media"),
    "media": ("news", "press"),
    "coverage": ("news", "media"),
    "sentiment": ("news", "mood", "tone"),
    "insider": ("insiders", "executives"),
    "insiders": ("insider",),
    "executive": ("executives", "insider"),
    "executives": ("executive", "insider"),
    "ceo": ("executives", "insider"),
    "cfo": ("executives", "insider"),
    "institution": ("institutional",),
    "institutions": ("institutional",),
    "politician": ("congress", "politicians"),
    "politicians": ("congress", "politician"),
    "senator": ("congress", "senators"),
    "senators": ("congress", "senator"),
    "congressman": ("congress",),
    "congressmen": ("congress",),
    "lawmakers": ("congress",),
    "representative": ("congress", "representatives"),
    "representatives": ("congress", "representative"),
    # options
    "option": ("options",),
    "options": ("option",),
    "calls": ("call", "options"),
    "puts": ("put", "options"),
    "iv": ("implied", "volatility"),
    "greeks": ("greek", "delta", "gamma"),
    "delta": ("greeks",),
    "gamma": ("greeks",),
    "theta": ("greeks",),
    "vega": ("greeks",),
    "oi": ("open", "interest"),
    "pcr": ("put", "call", "ratio"),
    # forex, crypto
    "fx": ("forex", "currency", "exchange"),
    "forex": ("fx", "currency", "exchange"),
    "currency": ("currencies", "fx", "exchange"),
    "currencies": ("currency", "fx"),
    "convert": ("exchange", "rate", "converter"),
    "conversion": ("convert", "exchange"),
    "crypto": ("cryptocurrency", "digital", "coin"),
    "cryptocurrency": ("crypto", "digital"),
    "coin": ("crypto", "cryptocurrency"),
    "coins": ("crypto", "cryptocurrency"),
    "token": ("crypto",),
    # commodities
    "oil": ("crude", "petroleum"),
    "crude": ("oil",),
    "gas": ("natural",),
    "natgas": ("natural", "gas"),
    "gold": ("xau", "bullion"),
    "silver": ("xag", "bullion"),
    "bullion": ("gold", "silver"),
    "commodity": ("commodities",),
    "commodities": ("commodity",),
    "grain": ("wheat", "corn"),
    "grains": ("grain", "wheat", "corn"),
    "maize": ("corn",),
    # economy
    "economy": ("economic", "gdp"),
    "economic": ("economy",),
    "growth": ("gdp",),
    "inflation": ("cpi",),
    "cpi": ("consumer", "inflation"),
    "jobs": ("employment", "payroll", "payrolls", "job"),
    "job": ("employment", "jobs"),
    "employment": ("jobs", "payroll", "labor"),
    "payrolls": ("payroll", "nonfarm", "employment"),
    "payroll": ("nonfarm", "employment"),
    "nfp": ("nonfarm", "payroll"),
    "jobless": ("unemployment",),
    "unemployed": ("unemployment",),
    "fed": ("federal", "funds", "reserve"),
    "fomc": ("federal", "funds"),
    "interest": ("rate", "rates"),
    "rates": ("rate", "yield"),
    "rate": ("rates",),
    "yield": ("yields",),
    "yields": ("yield",),
    "bond": ("bonds", "treasury", "yield"),
    "bonds": ("bond", "treasury", "yield"),
    "treasury": ("treasuries", "government", "bond"),
    "spending": ("consumer", "sales", "consumption"),
    "shoppers": ("retail", "consumer"),
    "consumers": ("consumer",),
    "recession": ("gdp", "economy"),
    # analytics and technicals
    "volatile": ("volatility",),
    "volatility": ("volatile", "variance"),
    "risk": ("volatility", "drawdown"),
    "correlation": ("correlated", "covariance"),
    "correlated": ("correlation",),
    "rolling": ("sliding", "moving", "window"),
    "trailing": ("rolling",),
    "returns": ("return",),
    "performance": ("return", "returns"),
    "indicator": ("indicators", "technical"),
    "indicators": ("indicator", "technical"),
    "oscillator": ("oscillators", "momentum"),
    "ma": ("moving", "average"),
    "sma": ("simple", "moving", "average"),
    "ema": ("exponential", "moving", "average"),
    "moving": ("average",),
    "rsi": ("relative", "strength"),
    "macd": ("convergence", "divergence"),
    "bollinger": ("bbands", "bands"),
    "overbought": ("oversold", "rsi"),
    "oversold": ("overbought", "rsi"),
    "momentum": ("oscillator",),
    "trend": ("trending",),
    # markets
    "market": ("markets", "exchange"),
    "markets": ("market", "exchange"),
    "exchange": ("exchanges", "market"),
    "closed": ("hours", "status"),
    "holiday": ("closed", "hours"),
    "movers": ("gainers", "losers"),
    "gainers": ("gainer", "movers", "winners"),
    "losers": ("loser", "movers"),
    "winners": ("gainers",),
    "active": ("actively", "volume"),
    "index": ("indices", "indexes"),
    "benchmark": ("index",),
    "etf": ("fund", "etfs"),
    "fund": ("etf", "funds"),
    "funds": ("fund", "etf"),
    "expense": ("fees",),
    "fees": ("expense", "fee"),
    "fee": ("expense", "fees"),
}

# ISO codes and names of currencies: two in a query ("EUR/USD", "dollars to yen") ask for an exchange rate.
CURRENCY_CODES = _words(
    """
    usd eur jpy gbp chf cad aud nzd cny cnh hkd sgd inr krw brl mxn zar sek nok dkk pln try rub twd thb idr php
    myr ils czk huf clp ars sar aed egp ngn vnd pkr
    """
)
CURRENCY_NAMES = _words(
    """
    dollar dollars euro euros yen sterling rupee rupees peso pesos yuan renminbi franc francs won rand krona kronor
    krone lira ruble rubles rouble roubles rupiah ringgit baht shekel shekels zloty forint loonie greenback buck
    bucks dirham riyal naira dong
    """
)
# "pound" is also a weight (cotton is priced per pound), so it is a currency only next to another currency.
WEAK_CURRENCY_NAMES = _words("pound pounds quid real reais")

# Coins people name; each stands for "crypto" in a query.
CRYPTO_COINS = _words(
    """
    bitcoin btc ethereum eth ether dogecoin doge solana sol xrp ripple cardano ada litecoin ltc bnb polkadot
    shiba avax avalanche matic polygon tether usdt usdc stablecoin stablecoins altcoin altcoins chainlink
    tron trx monero xmr stellar xlm uniswap
    """
)

# Well-known listed companies, as single distinctive words of their names, and their tickers (lower case). A query
# word found here is an entity: it names what to look up, not which kind of data. Words that are also finance
# terms (target, visa, block, gap, shell, ...) are left out on purpose.
COMPANY_WORDS = _words(
    """
    apple microsoft alphabet google amazon nvidia tesla meta facebook netflix intel amd oracle ibm cisco adobe
    salesforce qualcomm broadcom micron paypal shopify palantir snowflake uber lyft airbnb doordash spotify
    coinbase robinhood rivian lucid nio byd toyota honda sony samsung tsmc asml sap siemens volkswagen bmw mercedes
    porsche ferrari stellantis nestle unilever novartis roche astrazeneca glaxosmithkline gsk sanofi bayer novo
    nordisk bp totalenergies exxon exxonmobil chevron conocophillips schlumberger occidental berkshire
    jpmorgan goldman sachs morgan citigroup citi wells fargo hsbc barclays ubs blackrock schwab amex mastercard
    boeing airbus lockheed raytheon northrop caterpillar deere honeywell disney comcast warner paramount walmart
    costco kroger starbucks mcdonalds nike pepsico pepsi coca cola cocacola procter gamble colgate kellogg mondelez
    hershey pfizer moderna merck lilly abbvie amgen gilead regeneron vertex biogen johnson unitedhealth cvs
    walgreens humana anthem elevance medtronic abbott stryker verizon tmobile att alibaba tencent baidu jd pinduoduo
    temu xiaomi infosys wipro reliance tata hdfc icici petrobras vale nubank mercadolibre rakuten softbank nintendo
    hyundai kia lg ford gm carnival marriott hilton expedia ebay etsy wayfair chewy peloton gamestop amc blackberry
    nokia ericsson dell hp hpe lenovo intuit servicenow workday crowdstrike palo datadog cloudflare okta mongodb
    twilio roblox activision blizzard pinterest snapchat reddit twitter linkedin openai anthropic stripe spacex
    bytedance tiktok klarna revolut databricks instacart chipotle dominos yum lowes depot dollarama loblaw rogers
    bce enbridge suncor cenovus nutrien brookfield manulife sunlife rbc td scotiabank bmo cibc heineken diageo lvmh
    hermes kering loreal danone safran thales rio tinto bhp glencore anglo vodafone deutsche allianz axa prudential
    aig metlife chubb allstate mcdonald lowe
    """
)
TICKERS = _words(
    """
    aapl msft googl goog amzn nvda tsla meta fb nflx intc amd orcl csco adbe crm qcom avgo mu pypl pltr
    uber lyft abnb zm rivn lcid nio baba tcehy bidu jd pdd tsm asml sony tm hmc sap xom cvx cop slb oxy brk brk.a
    brk.b jpm gs wfc bac hsbc bcs ubs blk schw axp ba lmt rtx noc hon cmcsa wbd wmt kr sbux mcd nke pep ko pg
    cl mdlz hsy pfe mrna mrk lly abbv amgn gild regn vrtx biib jnj unh cvs wba hum elv mdt abt syk vz tmus ge gm dal
    ual aal luv ccl rcl mar hlt expe bkng ebay etsy chwy pton gme amc bb nok eric dell hpq hpe intu wday crwd panw
    ddog okta mdb twlo rblx ttwo pins rddt xpev smci mstr arkk spy voo ivv vti qqq dia iwm vxus vea vwo bnd agg tlt
    ief lqd hyg gld slv uso ung xle xlf xlk xlv xli xly xlp xlu xlb xlre xlc smh soxx tqqq sqqq sso spxl uvxy
    vxx sofi affy nvo azn gsk sny bp shel tte nsrgy rhhby nvs toyota txn adi amat lrc klac mrvl nxpi ibm acn infy
    hdb ibn ryaay bx kkr tgt hd tjx ross dg dltr bby cmg yum dpz qsr wen
    """
)

# Places outside the US. The catalog's economic series (GDP, CPI, jobs, rates, ...) cover the US only: a query naming
# another country or region is not answered by a tool whose summary says US (see `search.US_ONLY`).
FOREIGN_PLACES = _words(
    """
    china chinese uk britain british england english scotland wales ireland irish japan japanese germany german
    france french italy italian spain spanish portugal portuguese netherlands dutch belgium belgian switzerland
    swiss austria austrian sweden swedish norway norwegian denmark danish finland finnish poland polish greece
    turkey turkish russia russian ukraine ukrainian india indian pakistan bangladesh indonesia indonesian
    malaysia thailand thai vietnam vietnamese philippines singapore korea korean taiwan taiwanese hong kong
    australia australian zealand canada canadian mexico mexican brazil brazilian argentina argentinian chile
    chilean colombia peru venezuela nigeria nigerian egypt egyptian israel israeli saudi arabia emirates uae
    qatar iran iraq africa african europe european eurozone euro-area asia asian latam emerging ecb boe boj
    pboc rbi snb rba bundesbank ons eurostat
    """
)
# Words that put a query in the US; they carry the "us" every US-only tool says.
US_WORDS = _words("us usa america american americans nationwide")
# US states: a state names a place inside the US (the series are national, which is the closest the catalog has).
US_STATES = _words(
    """
    alabama alaska arizona arkansas california colorado connecticut delaware florida georgia hawaii idaho illinois
    indiana iowa kansas kentucky louisiana maine maryland massachusetts michigan minnesota mississippi missouri
    montana nebraska nevada ohio oklahoma oregon pennsylvania tennessee texas utah vermont virginia washington
    wisconsin wyoming carolina dakota
    """
)

# Subjects people ask about near the catalog's edges that no tool covers (other metals and crops, other rates and
# statistics, private companies, personal accounts and taxes). A query naming one counts it as an unanswered part,
# like an unknown word, even when its words appear in tool texts ("real estate", "consumer confidence").
OUT_OF_SCOPE = (
    "platinum",
    "palladium",
    "nickel",
    "zinc",
    "tin",
    "lithium",
    "cobalt",
    "uranium",
    "iron ore",
    "steel",
    "rhodium",
    "soybean",
    "soybeans",
    "soy",
    "cocoa",
    "oats",
    "rice",
    "cattle",
    "hogs",
    "lumber",
    "orange juice",
    "sofr",
    "libor",
    "mortgage",
    "mortgages",
    "prime rate",
    "deposit rate",
    "real estate",
    "home prices",
    "house prices",
    "housing",
    "rent",
    "consumer confidence",
    "consumer sentiment",
    "pmi",
    "national debt",
    "government debt",
    "federal debt",
    "deficit",
    "credit rating",
    "credit score",
    "nft",
    "nfts",
    "gas fee",
    "gas fees",
    "private valuation",
    "privately",
    "bank account",
    "bank balance",
    "brokerage account",
    "savings account",
    "my account",
    "tax",
    "taxes",
    "401k",
    "ira",
    "meeting",
    "meetings",
    # ratings and scores the catalog has no data for ("rating" alone would stem to "rate")
    "esg",
    "pce",
    "short interest",
    "days to cover",
    "funding round",
    # everyday life: shopping, travel, places, entertainment
    "near me",
    "store hours",
    "opening hours",
    "groceries",
    "grocery",
    "checking account",
    "return policy",
    "oil change",
    "cup",
    "menu",
    "recipe",
    "restaurant",
    "hotel",
    "flight",
    "flights",
    "weather",
    "tickets",
    "concert",
    "movie",
    "cheat codes",
    "things to do",
    "vacation",
    "capital of",
    "super bowl",
    "big mac",
)

# Phrases that make a query an explanation rather than a look-up (see search._asks_for_other).
EXPLAIN_PHRASES = ("difference between", "definition of", "meaning of", "how does it work")
# Phrases of a chat with the assistant itself.
CHAT_PHRASES = (
    "how are you",
    "who are you",
    "are you a",
    "are you an",
    "your name",
    "good night",
    "good morning",
    "thank you",
    "thanks",
    "what time is it",
    "today date",
    "days until",
)

# A request to act rather than to look something up: these verbs opening a query, followed by what they act on
# ("buy 10 shares", "sell all my", "open an account", "book me a flight", "write a letter").
ACTION_VERBS = _words("buy sell short place open book write translate transfer send pay cancel execute draft compose")
ACTION_OBJECTS = _words("a an the my me all some this these that our")
