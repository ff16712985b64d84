import CFaultVFS
import Foundation
import ObjectGraph
import Testing
import DataStackSQLite
import DataStackStores

/// The fault-injecting VFS itself: it counts and fails only the calls on the
/// files of its plan's folder, after the calls it was told to let pass, for
/// as many calls as it was told, and passes everything else through.
@Suite struct FaultPlanTests {
    /// A database with one table in a fresh folder watched by a plan.
    private struct Database {
        let directory = TemporaryDirectory()
        let plan: FaultPlan
        let connection: Connection

        init() throws {
            FaultPlan.installVFS()
            plan = FaultPlan(directory: directory.url)
            connection = try Connection(path: directory.file("plain.sqlite").path)
            try connection.execute("CREATE TABLE t (a)")
        }

        /// Inserts one row in its own transaction.
        func insert() throws { try connection.execute("INSERT INTO t VALUES (1)") }
    }

    @Test func anArmedFaultFailsTheCallAfterTheOnesToPassThenStops() throws {
        let database = try Database()
        database.plan.reset()
        try database.insert()
        let writesPerInsert = database.plan.callCount(.write)
        #expect(writesPerInsert > 0)

        database.plan.arm(.write, code: CFAULTVFS_IOERR_WRITE, after: writesPerInsert)
        try database.insert()   // its writes are the ones let through
        let error = try #require(throws: SQLiteError.self) { try database.insert() }
        #expect(error.extendedResultCode == CFAULTVFS_IOERR_WRITE)
        #expect(database.plan.injectedCount == 1)
        try database.insert()   // once: the next call passes
        #expect(try RawStore.int(database.directory.file("plain.sqlite"), "SELECT count(*) FROM t") == 3)
    }

    @Test func aFaultRepeatsForAsManyCallsAsAskedOrUntilDisarmed() throws {
        let database = try Database()
        database.plan.arm(.write, code: SQLITE_FULL, repeating: .times(2))
        #expect(throws: SQLiteError.self) { try database.insert() }
        #expect(throws: SQLiteError.self) { try database.insert() }
        try database.insert()
        #expect(database.plan.injectedCount == 2)

        database.plan.arm(.write, code: SQLITE_FULL, repeating: .always)
        for _ in 0..<3 { #expect(throws: SQLiteError.self) { try database.insert() } }
        database.plan.disarm()
        try database.insert()
        #expect(database.plan.injectedCount == 5)
    }

    @Test func filesOutsideThePlansFolderAreNeitherCountedNorFailed() throws {
        let watched = try Database()
        let other = try Database()
        watched.plan.reset()
        other.plan.reset()
        watched.plan.arm(.write, code: CFAULTVFS_IOERR_WRITE, repeating: .always)
        #expect(throws: SQLiteError.self) { try watched.insert() }
        try other.insert()
        #expect(other.plan.injectedCount == 0)
        #expect(watched.plan.callCount(.write) > 0)

        // A file beside the folder whose name merely starts with the folder's name.
        let sibling = URL(fileURLWithPath: watched.directory.url.path + "-sibling.sqlite")
        defer {
            for suffix in ["", "-wal", "-shm"] {
                try? FileManager.default.removeItem(atPath: sibling.path + suffix)   // a missing sidecar is fine
            }
        }
        let writes = watched.plan.callCount(.write)
        let connection = try Connection(path: sibling.path)
        try connection.execute("CREATE TABLE t (a); INSERT INTO t VALUES (1)")
        #expect(watched.plan.callCount(.write) == writes)
    }

    @Test func aFailedOpenOpensNothing() throws {
        let database = try Database()
        database.plan.arm(.open, code: SQLITE_CANTOPEN)
        let error = try #require(throws: SQLiteError.self) { try Connection(path: database.directory.file("other.sqlite").path) }
        #expect(error.resultCode == SQLiteError.SQLITE_CANTOPEN)
        #expect(!FileManager.default.fileExists(atPath: database.directory.file("other.sqlite").path))
    }
}
