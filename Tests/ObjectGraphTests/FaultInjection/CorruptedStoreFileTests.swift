@_spi(DataStackInternal) import DataStackSQLite
@testable import DataStackStores
import Foundation
@testable import ObjectGraph
import Testing

/// Damaged store files (pages overwritten, the file truncated, the header or
/// the `Z_METADATA` page damaged, each from a seeded random generator) are
/// opened and read in full: every entity fetched, every price update's fault
/// fired, every company's `updates` loaded. Opening or reading may fail, with
/// an error that names the file; nothing traps or hangs. Reading may also
/// succeed where SQLite cannot see the damage (a changed byte in a name), so
/// the engine is held to what SQLite itself reads from the same file: where a
/// raw query fails, the engine must not answer with data (a deleted object,
/// an empty relationship); where both answer, they agree.
@Suite struct CorruptedStoreFileTests {
    static let companies = 60
    static let updatesEach = 4

    /// How the file is damaged.
    enum Damage: String, CaseIterable, Sendable {
        /// One to three pages (the first included) overwritten, whole or in part.
        case pages
        /// The file cut at a random length.
        case truncation
        /// One to eight bytes of the 100-byte database header changed.
        case header
        /// Bytes of the page holding `Z_METADATA` changed: of its property
        /// list (even seeds) or of its page header (odd seeds).
        case metadataPage

        var cases: Int {
            switch self {
            case .pages: 120
            case .truncation: 60
            case .header: 60
            case .metadataPage: 60
            }
        }
    }

    /// What happened to the damaged files of one group.
    struct Tally {
        var cases = 0
        var openErrors = 0
        var openedCleanly = 0
        /// Opened, and some read threw.
        var readErrors = 0
        /// Opened, and every read answered as SQLite reads the file.
        var readAsSQLiteReads = 0
        /// Damage SQLite's `integrity_check` does not report (or could not run on).
        var integrityUndetected = 0
        /// A read answered with data where SQLite's own read of the file fails.
        var errorsTurnedIntoData = 0
        /// The files where that happened, each with its first example.
        var errorsTurnedIntoDataExamples: [String] = []
        /// A read answered other data than SQLite reads from the file.
        var wrongAnswers = 0
        /// Opened with no metadata: a property list that no longer decodes read as empty.
        var metadataLost: [String] = []
        /// Opened with some metadata keys missing (a key's bytes damaged, the
        /// list still decodes): damage nothing can see, allowed.
        var metadataKeysChanged = 0

        func summary(_ group: String) -> String {
            "fault-injection corrupted \(group): \(cases) cases, \(openErrors) open errors, \(openedCleanly) opened "
                + "(\(readErrors) with read errors, \(readAsSQLiteReads) read as SQLite reads it), "
                + "\(errorsTurnedIntoData) errors turned into data (in \(errorsTurnedIntoDataExamples.count) files), "
                + "\(wrongAnswers) other answers than SQLite's, \(metadataLost.count) opened with metadata lost, "
                + "\(metadataKeysChanged) with metadata keys changed, "
                + "\(integrityUndetected) damages integrity_check does not see"
        }
    }

    @Test(.timeLimit(.minutes(1)), arguments: Damage.allCases)
    func aDamagedFileGivesAnErrorNamingItOrTheDataSQLiteReads(damage: Damage) throws {
        let template = try StoreTemplate(companies: Self.companies, updatesEach: Self.updatesEach)
        let pristine = try Data(contentsOf: template.url)
        let layout = try FileLayout(template.url, size: pristine.count)
        let metadataKeys = Set(try SQLiteStoreFile.metadata(at: template.url).keys)
        let directory = TemporaryDirectory()
        var tally = Tally()
        for seed in 0..<damage.cases {
            var random = SplitMix64(seed: UInt64(seed))
            let url = directory.file("\(damage.rawValue)-\(seed).sqlite")
            try layout.damaged(pristine, damage, seed: seed, using: &random).write(to: url)
            try check(url, what: "\(damage.rawValue) seed \(seed)", metadataKeys: metadataKeys, tally: &tally)
            for suffix in [""] + SQLiteStoreFile.sidecarSuffixes {
                try? FileManager.default.removeItem(atPath: url.path + suffix)   // a missing sidecar is fine
            }
        }
        print(tally.summary(damage.rawValue))
        #expect(tally.cases == damage.cases)
        // One issue per group, not per read: the seeds and a first example of each file.
        if !tally.errorsTurnedIntoDataExamples.isEmpty {
            let files = tally.errorsTurnedIntoDataExamples
            Issue.record("errors turned into data: \(tally.errorsTurnedIntoData) reads in \(files.count) files:\n\(files.joined(separator: "\n"))")
        }
        if !tally.metadataLost.isEmpty {
            // A Z_PLIST that no longer decodes must fail the open with the file's
            // name, not open as empty metadata.
            Issue.record("\(tally.metadataLost.count) files opened with no metadata: \(tally.metadataLost.joined(separator: ", "))")
        }
        #expect(tally.wrongAnswers == 0)
    }

    // MARK: - One file

    private func check(_ url: URL, what: String, metadataKeys: Set<String>, tally: inout Tally) throws {
        tally.cases += 1
        let integrity = Result { try RawStore.open(url, readOnly: true).integrityCheck() }
        if case .success(let problems) = integrity, problems == ["ok"] { tally.integrityUndetected += 1 }

        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let store: any PersistentStore
        do {
            store = try coordinator.addPersistentStore(type: .sqlite, at: url)
        } catch {
            tally.openErrors += 1
            expectNamesFile(error, url, what: "\(what): opening")
            return
        }
        tally.openedCleanly += 1
        let keptKeys = Set(coordinator.metadata(for: store).keys)
        if !metadataKeys.subtracting(keptKeys).isEmpty && keptKeys.isSubset(of: [StoreMetadataKey.storeType, StoreMetadataKey.storeUUID]) {
            tally.metadataLost.append(what)
        } else if !metadataKeys.subtracting(keptKeys).isEmpty {
            tally.metadataKeysChanged += 1
        }
        defer { for store in coordinator.persistentStores { try? coordinator.remove(store) } }   // closing cannot fail a read-only check
        let oracle = RawAnswers(url)
        var firstErrorTurnedIntoData: String?
        var readFailed = false
        var answeredAsSQLite = true

        /// Runs one engine read; an error must name the file, an answer must be SQLite's.
        func compare<Answer: Equatable>(_ step: String, engine: () throws -> Answer, sqlite: Result<Answer, any Error>) {
            do {
                let answer = try engine()
                switch sqlite {
                case .failure:
                    tally.errorsTurnedIntoData += 1
                    answeredAsSQLite = false
                    if firstErrorTurnedIntoData == nil {
                        firstErrorTurnedIntoData = "\(what): \(step) answered \(answer) where SQLite's read of the file fails"
                    }
                case .success(let expected) where expected != answer:
                    tally.wrongAnswers += 1
                    answeredAsSQLite = false
                    Issue.record("\(what): \(step) answered \(answer), SQLite reads \(expected)")
                case .success:
                    break
                }
            } catch {
                readFailed = true
                answeredAsSQLite = false
                expectNamesFile(error, url, what: "\(what): \(step)")
            }
        }

        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        context.performAndWait {
            // Faults first, while the coordinator's row cache is empty: each fires from the file.
            var updateIDs = FetchRequest<ObjectID>(entityName: "StockUpdate")
            updateIDs.resultType = .managedObjectID
            compare("fetching the price updates' IDs", engine: { try context.fetch(updateIDs).compactMap(\.primaryKey).sorted() },
                    sqlite: oracle.updateKeys)
            if let ids = try? context.fetch(updateIDs) {   // its error was checked just above
                for id in ids {
                    guard let update = context.object(with: id) as? StockUpdate, let key = id.primaryKey else { continue }
                    compare("firing the fault of price update \(key)",
                            engine: {
                                // The throwing path, so the fix of issue #14's defect 1 shows here as an error.
                                let price = try update.value(forKey: "price") as? Double
                                return update.isDeleted ? "deleted" : "\(price ?? .nan)"
                            },
                            sqlite: oracle.price(key))
                }
            }
            compare("fetching the companies", engine: { try context.fetch(companiesBySymbol).map { "\($0.symbol) \($0.employees)" }.sorted() },
                    sqlite: oracle.companies)
            if let companies = try? context.fetch(companiesBySymbol) {   // its error was checked just above
                for company in companies {
                    guard let key = company.objectID.primaryKey else { continue }
                    compare("loading the updates of company \(key)", engine: {
                        (try company.value(forKey: "updates") as? Set<ManagedObject>)?.count ?? -1
                    }, sqlite: oracle.updateCount(key))
                }
            }
        }
        if readFailed { tally.readErrors += 1 }
        if let firstErrorTurnedIntoData { tally.errorsTurnedIntoDataExamples.append(firstErrorTurnedIntoData) }
        if answeredAsSQLite { tally.readAsSQLiteReads += 1 }
    }

    /// The error is typed and names the damaged file (a fault's, through the
    /// ``FaultFulfillmentError`` that carries it).
    private func expectNamesFile(_ error: any Error, _ url: URL, what: String) {
        if let storeError = ((error as? FaultFulfillmentError)?.underlying ?? error) as? PersistentStoreError {
            #expect(storeError.url?.standardizedFileURL == url.standardizedFileURL, "\(what): the error names the file: \(error)")
        } else {
            Issue.record("\(what): a PersistentStoreError naming the file, not \(type(of: error)): \(error)")
        }
    }
}

/// Where the damage goes: the page size, and the page holding `Z_METADATA`.
private struct FileLayout {
    let size: Int
    let pageSize: Int
    let metadataPage: Int
    /// Where `Z_METADATA`'s binary property list lies in the file.
    let metadataPropertyList: Range<Int>

    init(_ url: URL, size: Int) throws {
        let connection = try RawStore.open(url, readOnly: true)
        let pageSizeRow = try connection.prepare("PRAGMA page_size")
        _ = try pageSizeRow.step()
        pageSize = Int(pageSizeRow.int64(at: 0))
        let root = try connection.prepare("SELECT rootpage FROM sqlite_master WHERE name = 'Z_METADATA'")
        _ = try root.step()
        metadataPage = Int(root.int64(at: 0))
        self.size = size
        let plist = try connection.prepare("SELECT Z_PLIST FROM Z_METADATA")
        _ = try plist.step()
        let bytes = try Data(contentsOf: url)
        let page = (metadataPage - 1) * pageSize..<metadataPage * pageSize
        let found = try #require(bytes[page].firstRange(of: plist.data(at: 0) ?? Data()), "the property list lies in its page")
        metadataPropertyList = found
    }

    var pageCount: Int { size / pageSize }

    func damaged(_ pristine: Data, _ damage: CorruptedStoreFileTests.Damage, seed: Int, using random: inout SplitMix64) -> Data {
        var bytes = pristine
        switch damage {
        case .pages:
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let page = Int.random(in: 0..<pageCount, using: &random)
                let whole = Bool.random(using: &random)
                let length = whole ? pageSize : Int.random(in: 1...64, using: &random)
                let start = page * pageSize + (whole ? 0 : Int.random(in: 0...(pageSize - length), using: &random))
                overwrite(&bytes, at: start, length: length, using: &random)
            }
        case .truncation:
            bytes = bytes.prefix(Int.random(in: 1..<size, using: &random))
        case .header:
            for _ in 0..<Int.random(in: 1...8, using: &random) {
                overwrite(&bytes, at: Int.random(in: 0..<100, using: &random), length: 1, using: &random)
            }
        case .metadataPage where seed.isMultiple(of: 2):
            let length = Int.random(in: 1...4, using: &random)
            overwrite(&bytes, at: Int.random(in: metadataPropertyList, using: &random), length: length, using: &random)
        case .metadataPage:
            // The b-tree page header: 100 bytes in, on the first page.
            let header = (metadataPage - 1) * pageSize + (metadataPage == 1 ? 100 : 0)
            overwrite(&bytes, at: header + Int.random(in: 0..<12, using: &random), length: 1, using: &random)
        }
        return bytes
    }

    private func overwrite(_ bytes: inout Data, at start: Int, length: Int, using random: inout SplitMix64) {
        for offset in start..<min(start + length, bytes.count) {
            var byte = UInt8.random(in: 0...255, using: &random)
            if byte == bytes[offset] { byte ^= 0xFF }   // always a change
            bytes[offset] = byte
        }
    }
}

/// The same facts read with plain SQL on a read-only connection: the oracle
/// for what the file holds as SQLite sees it. Each query reads the columns
/// the store's own query reads (rows of the entity's `Z_ENT` only), so both
/// meet the same damaged pages.
private struct RawAnswers {
    let connection: Result<Connection, any Error>
    /// `Z_ENT` of Company and of StockUpdate.
    let numbers: Result<(company: Int64, update: Int64), any Error>

    init(_ url: URL) {
        let connection = Result { try RawStore.open(url, readOnly: true) }
        self.connection = connection
        numbers = Result {
            let statement = try connection.get().prepare("SELECT Z_NAME, Z_ENT FROM Z_PRIMARYKEY")
            var numbers: [String: Int64] = [:]
            while try statement.step() { numbers[statement.string(at: 0) ?? ""] = statement.int64(at: 1) }
            return (numbers["Company"] ?? -1, numbers["StockUpdate"] ?? -1)
        }
    }

    private func rows<T>(_ sql: (Int64, Int64) -> String, _ key: Int64? = nil, _ row: (Statement) -> T) -> Result<[T], any Error> {
        Result {
            let (company, update) = try numbers.get()
            let statement = try connection.get().prepare(sql(company, update))
            if let key { try statement.bind(key, at: 1) }
            var values: [T] = []
            while try statement.step() { values.append(row(statement)) }
            return values
        }
    }

    /// Sorted here: on a damaged table SQLite's `ORDER BY Z_PK` walks the
    /// b-tree, trusting it to be in key order, and a misplaced cell comes out of order.
    var updateKeys: Result<[Int64], any Error> {
        rows({ "SELECT Z_PK FROM ZSTOCKUPDATE WHERE Z_ENT = \($1)" }) { $0.int64(at: 0) }.map { $0.sorted() }
    }

    var companies: Result<[String], any Error> {
        rows({ company, _ in "SELECT ZSYMBOL, ZEMPLOYEES, * FROM ZCOMPANY WHERE Z_ENT = \(company)" }) {
            "\($0.string(at: 0) ?? "") \($0.int64(at: 1))"
        }.map { $0.sorted() }
    }

    func price(_ key: Int64) -> Result<String, any Error> {
        rows({ "SELECT ZPRICE, * FROM ZSTOCKUPDATE WHERE Z_PK = ? AND Z_ENT = \($1)" }, key) { "\($0.double(at: 0))" }
            .map { $0.first ?? "deleted" }
    }

    func updateCount(_ key: Int64) -> Result<Int, any Error> {
        rows({ "SELECT Z_PK FROM ZSTOCKUPDATE WHERE ZCOMPANY = ? AND Z_ENT = \($1)" }, key) { $0.int64(at: 0) }.map(\.count)
    }
}
