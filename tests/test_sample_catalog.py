"""The sample upstream against the whole catalog, and the bytes it must never change.

The pins below are sha256 digests of answers recorded from the sample upstream before it covered the whole
catalog (when it simulated 12 functions): those answers feed other tests and the token report, so widening
the simulation must leave every one of them byte for byte as it was.

Run with: .venv/bin/python -m pytest tests/test_sample_catalog.py -q
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from progressive_mcp.sample_upstream import Faults, answer_query

# (faults, query parameters, sha256 of "<status> <content type>\n" + body); the key is "k" unless given
PINNED: list[tuple[dict[str, Any], dict[str, str], str]] = [
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "IBM"},
        "7102e3cbc37d048008c7675aa7117588fae3a4688eef59ffa77d83e931416430",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "AAPL"},
        "b7515df02e92ef16f5043e43f95976b42dbc2c63a90262ade12d919457e473e3",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "ibm", "datatype": "csv"},
        "9b25a850802e0a8c9f9fb2d18ecfd5d378d3d7486fde4287410109d888449449",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "NOPE"},
        "cbf48ae16926776a56f53de46ee73817f9bbbbad7f36cc056af37a1234d3c14d",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "NOPE", "datatype": "csv"},
        "01a9c9516ba1b538e9d5169fbd6963fc4b45235cfaf59dc23f4332416a5bd596",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "SPY", "entitlement": "delayed"},
        "8e5a2ed5c32bce0a4241b3d5d7801f3c7f4cbf746da34dbbc8605d0f5785412a",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "IBM", "entitlement": "realtime"},
        "fe6abdab6bb059208e8fc31b165689a1478e486e9fa21d4e4f6d369dc4e091fe",
    ),
    ({}, {"function": "GLOBAL_QUOTE"}, "eb739554b9193f6a585c75c400da2842333b3440d3a84f0f21d40143578d0d91"),
    (
        {},
        {"function": "TIME_SERIES_DAILY", "symbol": "IBM"},
        "108eb037aa27e154fd3e224f29c2929947a77615ccf8af4646089bde59b0a8fe",
    ),
    (
        {},
        {"function": "TIME_SERIES_DAILY", "symbol": "IBM", "outputsize": "full"},
        "c24039f5647a6d39bf6e10b4856cd834b3a5097e0ec6323b317e0874a9bc4811",
    ),
    (
        {},
        {"function": "TIME_SERIES_DAILY", "symbol": "MSFT", "datatype": "csv"},
        "a360367de1cf56231beff4228fcd86bb623794833ef330c37d90719c1c48dc30",
    ),
    (
        {},
        {"function": "TIME_SERIES_DAILY", "symbol": "TSLA", "outputsize": "compact"},
        "89beb276b6ff3f55dd9d70731c3fee7565671c6f8df7761b159973b49d4299bb",
    ),
    (
        {},
        {"function": "TIME_SERIES_DAILY", "symbol": "NVDA", "outputsize": "full", "datatype": "csv"},
        "f3005a9a5bbff453e17166989b994f83d878e9cf0a5b5286d022856f66f31a52",
    ),
    (
        {},
        {"function": "TIME_SERIES_DAILY", "symbol": "NOPE"},
        "fd2f72aa1556c1436975b78dd4d3a30c40e8b4fb05f82cb1852be6ee2caba1bb",
    ),
    (
        {},
        {"function": "TIME_SERIES_INTRADAY", "symbol": "IBM", "interval": "5min"},
        "21ed9beb1bffec71d0b8ed785af1523aa158f3663a695bc996399eefe9f7949d",
    ),
    (
        {},
        {"function": "TIME_SERIES_INTRADAY", "symbol": "AAPL", "interval": "1min", "outputsize": "full"},
        "9f81564a50abe75fa9740aac8532d18e32ab885d2272f01260bcd522300f6ca9",
    ),
    (
        {},
        {"function": "TIME_SERIES_INTRADAY", "symbol": "IBM", "interval": "60min", "month": "2020-01"},
        "63755f87fe795745402c96d1f87169170aaea83c2307e795b8f05b3b3ba2e338",
    ),
    (
        {},
        {"function": "TIME_SERIES_INTRADAY", "symbol": "MSFT", "interval": "15min", "extended_hours": "false"},
        "c2a32fdd879c0221b2544d753c9fa6e09ff37ca6af7bb796feac9acdcd3db34a",
    ),
    (
        {},
        {
            "function": "TIME_SERIES_INTRADAY",
            "symbol": "SPY",
            "interval": "30min",
            "datatype": "csv",
            "adjusted": "false",
        },
        "4182362e19cdf04c8d179163f9f1e5ff3e3e06e52b65e001882ace29a2fd7c47",
    ),
    (
        {},
        {"function": "TIME_SERIES_INTRADAY", "symbol": "IBM", "interval": "5min", "month": "2030-01"},
        "c0c3e38da67c14cfc8fcd665674be507ca16402656aca1382ce78dc14b9cda56",
    ),
    (
        {},
        {"function": "TIME_SERIES_WEEKLY", "symbol": "IBM"},
        "f23b71ad9fc59cea15783c19de35b14428a909fdc7772f3db6ed2410958f454e",
    ),
    (
        {},
        {"function": "TIME_SERIES_WEEKLY", "symbol": "SPY", "datatype": "csv"},
        "3a64298fe001550f424203311dd493a0f5391bf522f91607b7521b394734de21",
    ),
    (
        {},
        {"function": "TIME_SERIES_MONTHLY", "symbol": "IBM"},
        "7a076b891b0b0ee3310b6711e6437371e51178b04d132af759217792fd7a525c",
    ),
    (
        {},
        {"function": "TIME_SERIES_MONTHLY", "symbol": "AAPL", "datatype": "csv"},
        "aaced8d677a8027e9d35d805563db592b8fa0ef5c61dbed41bf96719467e2595",
    ),
    (
        {},
        {"function": "SYMBOL_SEARCH", "keywords": "ibm"},
        "9d21ff8d73403225b418942e71950a1a772b412e32be70566c4766b69cec502a",
    ),
    (
        {},
        {"function": "SYMBOL_SEARCH", "keywords": "micro"},
        "9ce7a87d42ac83d2035cc2ddf83aeca20ac1e86bfca0be113dc6431b18888c44",
    ),
    (
        {},
        {"function": "SYMBOL_SEARCH", "keywords": "a"},
        "d1eea156511dee5d420e8c31204489ac6c609df3c43c61be0d1717d8c938edc7",
    ),
    (
        {},
        {"function": "SYMBOL_SEARCH", "keywords": "tesla"},
        "687579699ab0247d3daa339a9befc01421dcd8ad65a031f9b18961a1ab566d9d",
    ),
    (
        {},
        {"function": "SYMBOL_SEARCH", "keywords": "xyz"},
        "408c3d9c08c1f37ae3558ae5052221c4d6f5dc6516fc167fffbaff43aa2bcd71",
    ),
    (
        {},
        {"function": "SYMBOL_SEARCH", "keywords": "trust"},
        "3078db447c732f4ea603ed61f805dc74c2ad8b5e41de95ad57788178ec4631c2",
    ),
    (
        {},
        {"function": "SYMBOL_SEARCH", "keywords": "app", "datatype": "csv"},
        "27e0ba9f0eec6f46cbe84c9a3be0ebb05246f28c9e95648b9b9c95296609e40c",
    ),
    ({}, {"function": "OVERVIEW", "symbol": "IBM"}, "b513d65036d554d7c1593af9089c5928621a6b675571117854ab0aefe7c9155d"),
    ({}, {"function": "OVERVIEW", "symbol": "SPY"}, "55f38e557c29ec51ecd34231984011ee3ad35ff009efbbe0263bd415c1335ec9"),
    (
        {},
        {"function": "OVERVIEW", "symbol": "NOPE"},
        "a5339ad0007bb09cc41736258c364bd40dd28778e69c75e0f3b0d25647fcdd7a",
    ),
    (
        {},
        {"function": "CURRENCY_EXCHANGE_RATE", "from_currency": "USD", "to_currency": "JPY"},
        "69dc76564df61147d39d026b88a06ed8f0936b240445b0fa3012ce4f3153fe8f",
    ),
    (
        {},
        {"function": "CURRENCY_EXCHANGE_RATE", "from_currency": "BTC", "to_currency": "USD"},
        "3a0ad239bcd27b56dc13a00cd05a637d74981f9511eb10886f16e8f6ab9986db",
    ),
    (
        {},
        {"function": "CURRENCY_EXCHANGE_RATE", "from_currency": "EUR", "to_currency": "GBP", "datatype": "csv"},
        "ef40211f02e58b40adec8e412d5153c829a8c58378b5ae157ec84c278004e847",
    ),
    (
        {},
        {"function": "CURRENCY_EXCHANGE_RATE", "from_currency": "XXX", "to_currency": "USD"},
        "4ae144b606821dfdc57c205bb5578f816ba7a6a777f3b07a3dddf8e538963c19",
    ),
    (
        {},
        {"function": "RSI", "symbol": "IBM", "interval": "daily", "time_period": "14", "series_type": "close"},
        "8abf1a47abde932a075563ef176bb389bf06d58d5cfa92b44f63e0a0aa26e46d",
    ),
    (
        {},
        {"function": "RSI", "symbol": "AAPL", "interval": "60min", "time_period": "10", "series_type": "open"},
        "09e626ddd20bd75532c18e2e5e6c891990f13e202df8e263a9077c8eaefd0540",
    ),
    (
        {},
        {"function": "RSI", "symbol": "IBM", "interval": "weekly", "time_period": "14", "series_type": "close"},
        "126de072b40fd75d66ef1a5e92bcd351f746ddb197bbccf040d6300127a2d439",
    ),
    (
        {},
        {
            "function": "RSI",
            "symbol": "MSFT",
            "interval": "monthly",
            "time_period": "7",
            "series_type": "high",
            "datatype": "csv",
        },
        "eba258da6e67d05bfb125b70ddbb6af45f08c7247ea4ca638c6020d07e8942b5",
    ),
    (
        {},
        {"function": "SMA", "symbol": "IBM", "interval": "daily", "time_period": "20", "series_type": "close"},
        "f7056314911c9a1f154b9f35e3f582d45c53c413aedbb0538ebc8fb05b2b8c1f",
    ),
    (
        {},
        {
            "function": "SMA",
            "symbol": "NVDA",
            "interval": "5min",
            "time_period": "50",
            "series_type": "low",
            "datatype": "csv",
        },
        "071708b087da0f5d4d1e384bf590f46f3b446de7b9dbcc8a11fdcee2c257f718",
    ),
    (
        {},
        {"function": "SMA", "symbol": "IBM", "interval": "daily", "series_type": "close"},
        "7b787d268ba4ccf0f9432980c4873bde717cefc891ee8053845fdab4aba06b87",
    ),
    ({}, {"function": "REAL_GDP"}, "297938e26a29c86b367054f3310d7155a4b3c1b36ed41b35ae64cb1972683dc6"),
    (
        {},
        {"function": "REAL_GDP", "interval": "quarterly"},
        "ce2ab6a78499c60b4cfed3ea4343eb281188de4d7c96fe4a907b2dcd4ac8c4f2",
    ),
    (
        {},
        {"function": "REAL_GDP", "interval": "annual", "datatype": "csv"},
        "bdd8e2e0f2f46a18c3405e5c85ca244cac3c56be851ae36e19a6bf794fe4e502",
    ),
    (
        {},
        {"function": "REAL_GDP", "interval": "weekly"},
        "d1b7299e11de8c65bdddfaa599447f65f756de4163790af6fe0f614ee567d0d3",
    ),
    ({}, {"function": "CPI"}, "731c90a52e75b4c7f0b519c7df8aa81ff833ee460d44b70a42c40fbfd89b3bbd"),
    (
        {},
        {"function": "CPI", "interval": "semiannual"},
        "0a758a144ffbdc428cdfd9b5716ff5c9b0984f41c1af37981355dcff1b8576e2",
    ),
    ({}, {"function": "CPI", "datatype": "csv"}, "a4b014c1a8a0d8cbbd197b8bd31a07418d1a972adf6d8a9d642d2f388cf7da75"),
    ({}, {"function": "NOT_A_FUNCTION"}, "c7205887b6845bf8d6c55b35f961b39c7819bbe3762922b65a75bf1aefa96909"),
    (
        {},
        {"function": "TIME_SERIES_DAILY_ADJUSTED", "symbol": "IBM"},
        "fe6abdab6bb059208e8fc31b165689a1478e486e9fa21d4e4f6d369dc4e091fe",
    ),
    (
        {},
        {"function": "REALTIME_BULK_QUOTES", "symbol": "IBM,AAPL"},
        "fe6abdab6bb059208e8fc31b165689a1478e486e9fa21d4e4f6d369dc4e091fe",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "IBM", "apikey": "ratelimited"},
        "3b8065922cf779bdd76b6646c87bd0524c0ee58c84768ffef0f582e4ab201eb3",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "IBM", "apikey": "invalid-key"},
        "97ba6df9574d090d7cf49840c652747bb15c4b3854ea304f92b631c418c25850",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "IBM", "apikey": ""},
        "97ba6df9574d090d7cf49840c652747bb15c4b3854ea304f92b631c418c25850",
    ),
    (
        {"malformed": True},
        {"function": "GLOBAL_QUOTE", "symbol": "IBM"},
        "813087da22e82e5d200c10222bdf948e7d896393b7f292fcf44cd5246e6ff2ba",
    ),
    (
        {"malformed": True},
        {"function": "TIME_SERIES_DAILY", "symbol": "IBM", "datatype": "csv"},
        "19a07a4dfb3e460178b42ec7421b69dabd54d4a8bb6dbce61318e67a4c2a8091",
    ),
    (
        {"huge": True},
        {"function": "TIME_SERIES_MONTHLY", "symbol": "MSFT"},
        "2341cc5963999b0d00f61db81b9529670b341d9a1c6a1140f2542becbf674524",
    ),
    (
        {"huge": True},
        {"function": "TIME_SERIES_INTRADAY", "symbol": "IBM", "interval": "60min", "datatype": "csv"},
        "a63962e98db75cd83b22c3b77e5c89a43e533dccb0bd89deea0477a982f8f778",
    ),
    (
        {},
        {
            "function": "RSI",
            "symbol": "IBM",
            "interval": "15min",
            "time_period": "14",
            "series_type": "close",
            "month": "2020-01",
        },
        "c776d868e6ac2ca54cb2babe61f247b334aadab2aa33c2451556828499d9453a",
    ),
    (
        {},
        {"function": "SMA", "symbol": "TSLA", "interval": "1min", "time_period": "9", "series_type": "open"},
        "2c90a5a1a684b18005cec710b193387c6bbcba762c51538b945276d4b01eb702",
    ),
]


def digest(faults: dict[str, Any], params: dict[str, str]) -> str:
    reply = answer_query({"apikey": "k", **params}, Faults(**faults))
    return hashlib.sha256(f"{reply.status} {reply.content_type}\n".encode() + reply.body).hexdigest()


@pytest.mark.parametrize(("faults", "params", "expected"), PINNED, ids=[str(i) for i in range(len(PINNED))])
def test_previously_simulated_answers_are_unchanged(
    faults: dict[str, Any], params: dict[str, str], expected: str
) -> None:
    assert digest(faults, params) == expected, params
