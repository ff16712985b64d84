@_spi(DataStackInternal) import DataStackSQLite
import Foundation
@testable import ObjectGraph
import Testing
@testable import DataStackStores

/// What a Company/StockUpdate store file holds, read by a fresh connection
/// with no fault armed: each company with its values, row version and price
/// updates, the updates without a company, and each entity's `Z_MAX`.
///
/// Primary keys are left out on purpose: the order in which a save hands out
/// keys may differ between two stores filled the same way, and two files that
/// agree on everything else hold the same committed data.
struct StoreContents: Equatable, CustomStringConvertible {
    var lines: [String]

    /// Reads the file at `url` and checks it with `PRAGMA integrity_check`.
    ///
    /// Read-only by default, so that the file keeps its journal mode; a copy
    /// left by a crash needs a writable connection to roll back its journal.
    ///
    /// - Returns: The contents, and the integrity problems (empty when `ok`).
    static func read(_ url: URL, readOnly: Bool = true) throws -> (contents: StoreContents, integrityProblems: [String]) {
        let connection = try RawStore.open(url, readOnly: readOnly)
        let problems = try connection.integrityCheck().filter { $0 != "ok" }
        var lines: [String] = []
        for sql in queries {
            let statement = try connection.prepare(sql)
            while try statement.step() { lines.append(statement.string(at: 0) ?? "NULL") }
        }
        return (StoreContents(lines: lines), problems)
    }

    private static let queries = [
        """
        SELECT 'company ' || quote(c.ZSYMBOL) || ' ' || quote(c.ZNAME) || ' ' || c.ZEMPLOYEES || ' v' || c.Z_OPT
            || ' [' || ifnull((SELECT group_concat(line, ', ') FROM (
                SELECT u.ZPRICE || '/' || u.ZVOLUME || ' v' || u.Z_OPT AS line FROM ZSTOCKUPDATE u
                WHERE u.ZCOMPANY = c.Z_PK ORDER BY u.ZPRICE, u.ZVOLUME)), '') || ']'
        FROM ZCOMPANY c ORDER BY c.ZSYMBOL
        """,
        "SELECT 'orphan update ' || ZPRICE || '/' || ZVOLUME FROM ZSTOCKUPDATE WHERE ZCOMPANY IS NULL ORDER BY ZPRICE, ZVOLUME",
        "SELECT 'key ' || Z_NAME || ' ' || Z_MAX FROM Z_PRIMARYKEY ORDER BY Z_ENT",
    ]

    var description: String { lines.joined(separator: "\n") }
}

/// The figures of one group of fault-injection cases, printed as one line
/// for RELIABILITY.md's table.
struct FaultTally: Sendable {
    var cases = 0
    /// The operation threw an error (as it should when a fault reached it).
    var errors = 0
    /// A fault was injected, and SQLite or the store absorbed it (a retry), so
    /// the operation succeeded with the right result.
    var absorbed = 0
    /// The file failed `PRAGMA integrity_check` afterwards.
    var integrityFailures = 0
    /// A save reported as committed is not in the file, or a failed save's
    /// changes are (the file does not hold exactly the last committed state).
    var lostCommits = 0
    /// Wrong data returned without an error (fewer rows, other values).
    var wrongResults = 0
    /// A failed save that a crash right after it would bring back on recovery
    /// (SQLite reports a sync failing after the commit record was written).
    var resurrectedAfterCrash = 0

    func summary(_ group: String) -> String {
        "fault-injection \(group): \(cases) cases, \(errors) errors thrown, \(absorbed) absorbed, "
            + "\(integrityFailures) integrity failures, \(lostCommits) lost commits, \(wrongResults) wrong results"
    }
}

/// A store in a fresh folder whose file calls go through the fault-injecting
/// VFS, with a plan for that folder.
///
/// The VFS is installed before the store opens: a connection keeps the VFS it
/// was opened with, so connections opened earlier would escape the plan.
struct FaultStack {
    let directory: TemporaryDirectory
    let plan: FaultPlan
    let coordinator: PersistentStoreCoordinator
    let storeURL: URL

    /// Opens a new store, or a copy of `template`'s file.
    init(options: StoreOptions = StoreOptions(), copying template: StoreTemplate? = nil) throws {
        FaultPlan.installVFS()
        directory = TemporaryDirectory()
        plan = FaultPlan(directory: directory.url)
        storeURL = directory.file("Faults.sqlite")
        if let template {
            try FileManager.default.copyItem(at: template.url, to: storeURL)
        }
        coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        try coordinator.addPersistentStore(type: .sqlite, at: storeURL, options: options)
    }

    /// What recovery would find had the process died now: the store's file
    /// with its log or journal, copied without the `-shm` index, then opened.
    func contentsAfterCrash() throws -> (contents: StoreContents, integrityProblems: [String]) {
        let copy = directory.file("crashed-\(UUID().uuidString).sqlite")
        defer {
            for suffix in [""] + SQLiteStoreFile.sidecarSuffixes {
                try? FileManager.default.removeItem(atPath: copy.path + suffix)   // a missing sidecar is fine
            }
        }
        for suffix in ["", "-wal", "-journal"] where FileManager.default.fileExists(atPath: storeURL.path + suffix) {
            try FileManager.default.copyItem(atPath: storeURL.path + suffix, toPath: copy.path + suffix)
        }
        return try StoreContents.read(copy, readOnly: false)
    }

    /// Removes the store from the coordinator, which closes its connections
    /// (the last one to close checkpoints and deletes the write-ahead log).
    func close() throws {
        for store in coordinator.persistentStores { try coordinator.remove(store) }
    }

    func newContext() -> ManagedObjectContext {
        ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
    }

    /// Saves `count` companies `C0`, `C1`, … with `updatesEach` price updates each, in one save.
    ///
    /// - Returns: Each company's object ID URI by symbol; a copy of the file
    ///   keeps the store's UUID, so the URIs name the same rows in the copy.
    @discardableResult
    func seed(companies count: Int, updatesEach: Int) throws -> [String: URL] {
        let context = newContext()
        return try context.performAndWait {
            var companies: [Company] = []
            for index in 0..<count {
                let company = Company(context: context)
                company.symbol = "C\(index)"
                company.name = "Company \(index), a name long enough to spread the rows over many pages"
                company.employees = index * 10
                for number in 0..<updatesEach {
                    let update = StockUpdate(context: context)
                    update.price = Double(index) + Double(number) / 100
                    update.volume = Int64(number)
                    update.time = Date(timeIntervalSinceReferenceDate: Double(index * 1000 + number))
                    update.company = company
                }
                companies.append(company)
            }
            try context.save()
            return Dictionary(uniqueKeysWithValues: companies.map { ($0.symbol, $0.objectID.uriRepresentation()) })
        }
    }

    /// The ID of the company with this symbol in a copy of `template`, found
    /// without reading the file (so no page of it is cached yet).
    func companyID(_ symbol: String, in template: StoreTemplate) throws -> ObjectID {
        let uri = try #require(template.companyURIs[symbol], "no company \(symbol) in the template")
        return try #require(coordinator.managedObjectID(forURIRepresentation: uri))
    }
}

/// A seeded store file, made once and copied for each case of a group:
/// a copy costs far less than creating a store and saving into it.
struct StoreTemplate {
    private let directory: TemporaryDirectory
    let url: URL
    /// Each company's object ID URI, by symbol.
    let companyURIs: [String: URL]

    init(options: StoreOptions = StoreOptions(), companies: Int, updatesEach: Int) throws {
        let stack = try FaultStack(options: options)
        companyURIs = try stack.seed(companies: companies, updatesEach: updatesEach)
        try stack.close()
        directory = stack.directory
        url = stack.storeURL
        let leftovers = SQLiteStoreFile.sidecarSuffixes.filter { FileManager.default.fileExists(atPath: url.path + $0) }
        try #require(leftovers.isEmpty, "closing the template's store leaves one file, not also \(leftovers)")
    }
}

/// Every company, sorted by symbol.
let companiesBySymbol = FetchRequest<Company>(entityName: "Company", predicate: nil, sortDescriptors: [FetchSort(key: "symbol")])
