import TickerImportKit

// ticker-import: a live demonstration of the dual-coordinator stack. See the README.
TickerImportCommand.main()
