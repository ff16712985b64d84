import DataStackPostgreSQL
import DataStackPostgreSQLSync
import TickerImportKit

// ticker-import on PostgreSQL: the same command as the main package's
// ticker-import, with the PostgreSQL store registered, so that
// `--store postgresql://…` runs the example on a shared database, and the
// PostgreSQL sync hub, so that `--sync postgresql://…` keeps a local store
// in step with other replicas through it.
PostgreSQLStore.register()
PostgreSQLSyncHub.register()
TickerImportCommand.main()
