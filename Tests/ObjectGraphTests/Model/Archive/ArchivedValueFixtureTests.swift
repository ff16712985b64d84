@_spi(DataStackInternal) import DataStackSQLite
@testable import DataStackStores
import Foundation
@testable import ObjectGraph
import Testing

/// Keyed archives Apple wrote into the fixture stores' columns (transformable
/// attributes, secure-coding values), read with SQLite and decoded with
/// ``ArchivedValue``; the expected values were read with Python's `plistlib`.
@Suite struct ArchivedValueFixtureTests {
    /// `hwaxxer-bookmigration`: `Book.fileURL`, a transformable attribute with the
    /// default transformer, holds an archived `NSString`.
    @Test func defaultTransformerStringsDecode() throws {
        let blobs = try column("hwaxxer-bookmigration/stores/Model1.sqlite", "SELECT ZFILEURL FROM ZBOOK WHERE ZFILEURL IS NOT NULL ORDER BY Z_PK")
        let values = try blobs.map { try ArchivedValue.unarchive($0) }
        #expect(values.count == 4)
        #expect(values.prefix(3) == [.string("The Trial.file"), .string("Cosmos.file"), .string("Metamorphosis.file")])
    }

    /// Apple Notes (macOS 26): `ZREPLICAIDTOBUNDLEIDENTIFIER`, an `NSDictionary` of bundle identifiers to `NSUUID`s.
    @Test func dictionaryOfUUIDsDecodes() throws {
        let blobs = try column("apple-notes-notestore/stores/NoteStore-macOS-26-Tahoe.sqlite",
                               "SELECT ZREPLICAIDTOBUNDLEIDENTIFIER FROM ZICCLOUDSYNCINGOBJECT WHERE ZREPLICAIDTOBUNDLEIDENTIFIER IS NOT NULL")
        let value = try ArchivedValue.unarchive(try #require(blobs.first))
        #expect(value == .dictionary([
            .string("com.apple.Notes"): .uuid(UUID(uuidString: "84CD671C-0488-4C86-97A6-8F17D5CF7191")!),
            .string("com.apple.Notes.IntentsExtension"): .uuid(UUID(uuidString: "6A875536-E6A3-41CA-B41D-ABA63282D26E")!),
            .string("com.apple.Notes.SharingExtension"): .uuid(UUID(uuidString: "67050F75-2B18-4881-94DE-AA0C1A92A6F4")!),
        ]))
        let swift = try #require(value.foundationValue as? [String: UUID])
        #expect(swift.count == 3)
    }

    /// iOS Accounts: `ZACCOUNTPROPERTY.ZVALUE`, 145 secure-coded values of every
    /// common class (strings, numbers, booleans, dates, arrays, dictionaries,
    /// mutable sets, mutable data): every one decodes.
    @Test func everyAccountPropertyDecodes() throws {
        let path = "plaso-apple-stores/stores/ios-Accounts3.sqlite"
        let blobs = try column(path, "SELECT ZVALUE FROM ZACCOUNTPROPERTY WHERE ZVALUE IS NOT NULL ORDER BY Z_PK")
        #expect(blobs.count == 145)
        for (index, blob) in blobs.enumerated() {
            #expect(throws: Never.self, "row \(index + 1)") { _ = try ArchivedValue.unarchive(blob) }
        }
        // Rows 2 (storefrontID), 3 (dsid), 4 (isManagedAppleID), 55 (AKFollowUpAccountRefreshTimestamp).
        #expect(try ArchivedValue.unarchive(blobs[1]) == .string("143441-1,29"))
        #expect(try ArchivedValue.unarchive(blobs[2]) == .integer(17_193_901_029))
        #expect(try ArchivedValue.unarchive(blobs[3]) == .bool(false))
        #expect(try ArchivedValue.unarchive(blobs[54]) == .date(Date(timeIntervalSinceReferenceDate: 606_520_077.8892)))
        #expect(try ArchivedValue.unarchive(blobs[0]).foundationValue is [Any])   // cookies: an NSArray of NSDictionary
    }

    /// CoreDataPlus `SampleModel2`: transformables of app classes (`Content`,
    /// `CoreDataPlus_Tests.Cover`) are not Foundation values; the object reader still walks them.
    @Test func appClassesAreReportedAndStillWalkable() throws {
        let blobs = try column("coredataplus-samplemodel2-programmatic/stores/SampleModel2_V1.sqlite",
                               "SELECT ZCONTENT FROM ZPAGE WHERE ZCONTENT IS NOT NULL ORDER BY Z_PK LIMIT 3")
        let blob = try #require(blobs.first)
        do {
            _ = try ArchivedValue.unarchive(blob)
            Issue.record("an app class decoded as a Foundation value")
        } catch {
            #expect(error.code == .unsupportedClass)
            #expect(error.path == "root")
            #expect(error.message.contains("\"Content\""))
        }
        let content = try #require(try KeyedArchive(data: blob).topObject())
        #expect(content.className == "Content")
        #expect(try content.string("text") == "content for page 50")
    }

    /// iOS netusage: an archive whose root key is `opaque`, not `root`.
    @Test func otherTopKeysAreReachable() throws {
        let blobs = try column("plaso-apple-stores/stores/ios-netusage.sqlite", "SELECT ZMAP FROM ZPROVISIONINGDATA WHERE ZMAP IS NOT NULL ORDER BY Z_PK")
        let archive = try KeyedArchive(data: try #require(blobs.first))
        #expect(archive.topKeys == ["opaque"])
        #expect(try archive.topObject() == nil)
        let opaque = try #require(try archive.topObject(forKey: "opaque"))
        guard case .data(let data) = opaque.value else {
            Issue.record("opaque is \(opaque.value.kindDescription)")
            return
        }
        #expect(data.count == 32)
        var mutableData = 0
        for blob in blobs.dropFirst() where try KeyedArchive(data: blob).topObject(forKey: "opaque")?.className != nil {
            let object = try #require(try KeyedArchive(data: blob).topObject(forKey: "opaque"))
            #expect(object.className == "NSMutableData")
            #expect(try object.data("NS.data")?.isEmpty == false)
            mutableData += 1
        }
        #expect(mutableData > 0)
    }

    // MARK: - Helpers

    /// The first column of every row of `sql`, as blobs, from a copy of a fixture store.
    private func column(_ store: String, _ sql: String) throws -> [Data] {
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore(store)
        let connection = try Connection(path: url.path)
        let statement = try connection.prepare(sql)
        var result: [Data] = []
        while try statement.step() {
            result.append(statement.data(at: 0) ?? Data())
        }
        return result
    }
}
