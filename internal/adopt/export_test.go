package adopt

// BinlogCheck is binlogCheck, for the tests.
var BinlogCheck = binlogCheck
