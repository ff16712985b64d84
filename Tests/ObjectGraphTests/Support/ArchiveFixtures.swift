import Foundation
@testable import ObjectGraph

/// The inflated model caches under `Fixtures/Archives/` (taken from the
/// `Z_MODELCACHE` of fixture stores with Python's `zlib.decompress(blob, -15)`),
/// and what Python's `plistlib` reads from them (`expectations.json`).
enum ArchiveFixtures {
    /// What `plistlib.loads` gives for one file.
    struct Expectation: Decodable {
        let bytes: Int
        let objectCount: Int
        let topRoot: Int
        let instancesByClass: [String: Int]
        /// SHA-256 of ``canonicalForm(_:)`` as the Python script computes it.
        let canonicalSHA256: String
    }

    static let folder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()   // Support
        .deletingLastPathComponent()   // ObjectGraphTests
        .appendingPathComponent("Fixtures/Archives")

    static let modelCaches = [
        "SampleModel_V1.modelcache.bplist",            // coredataplus-samplemodel, macOS
        "NoteStore-macOS-26-Tahoe.modelcache.bplist",  // apple-notes-notestore, macOS 26
        "ios-netusage.modelcache.bplist",              // plaso-apple-stores: _NSPropertyDescriptionProxy, NSMutableString
    ]

    static func data(_ name: String) throws -> Data {
        try Data(contentsOf: folder.appendingPathComponent(name))
    }

    static let expectations: [String: Expectation] = {
        guard let data = try? data("expectations.json") else { return [:] }
        return (try? JSONDecoder().decode([String: Expectation].self, from: data)) ?? [:]
    }()

    /// A text form of a property list that the Python script computes identically:
    /// `b:` booleans, `i:` integers, `r:` real bit patterns, `x:` data and `s:` UTF-8
    /// strings in hex, `u:` UIDs, `a[…]` arrays, `{k=v,…}` dictionaries by key bytes.
    static func canonicalForm(_ value: PropertyListValue) -> String {
        func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
        switch value {
        case .bool(let bool): return "b:\(bool ? 1 : 0)"
        case .integer(let integer): return "i:\(integer)"
        case .real(let real): return "r:" + String(format: "%016llx", real.bitPattern)
        case .date(let date): return "date:\(date.timeIntervalSinceReferenceDate)"
        case .data(let data): return "x:" + hex(data)
        case .string(let string): return "s:" + hex(string.utf8)
        case .uid(let uid): return "u:\(uid)"
        case .array(let elements): return "a[" + elements.map(canonicalForm).joined(separator: ",") + "]"
        case .dictionary(let dictionary):
            let keys = dictionary.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            return "{" + keys.map { canonicalForm(.string($0)) + "=" + canonicalForm(dictionary[$0]!) }.joined(separator: ",") + "}"
        }
    }

    static func sha256Hex(_ text: String) -> String {
        SHA256.hash(Array(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// Assembles a `bplist00` from raw object bytes (each with its marker), with
    /// references and offsets of the given sizes: for hand-made bad inputs.
    static func assemble(_ objects: [[UInt8]], top: UInt64 = 0, referenceSize: UInt8 = 1, offsetSize: UInt8 = 2,
                         objectCount: UInt64? = nil, tableOffset: UInt64? = nil) -> Data {
        var out = Array("bplist00".utf8)
        var offsets: [Int] = []
        for object in objects {
            offsets.append(out.count)
            out += object
        }
        let table = out.count
        for offset in offsets {
            for shift in stride(from: Int(offsetSize - 1) * 8, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: offset >> shift)) }
        }
        out += [0, 0, 0, 0, 0, 0, offsetSize, referenceSize]
        for field in [objectCount ?? UInt64(objects.count), top, tableOffset ?? UInt64(table)] {
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: field >> UInt64(shift))) }
        }
        return Data(out)
    }
}
