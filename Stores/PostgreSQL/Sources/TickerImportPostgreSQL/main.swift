import DataStackPostgreSQL
import TickerImportKit

// ticker-import on PostgreSQL: the same command as the main package's
// ticker-import, with the PostgreSQL store registered, so that
// `--store postgresql://…` runs the example on a shared database.
PostgreSQLStore.register()
TickerImportCommand.main()
