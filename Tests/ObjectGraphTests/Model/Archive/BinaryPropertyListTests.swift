import Foundation
import Testing
@testable import ObjectGraph

/// The binary property list reader and writer: real model caches read as Python's
/// `plistlib` reads them, the writer's bytes are `plistlib`'s, and malformed
/// lists throw errors that say where.
@Suite struct BinaryPropertyListTests {
    // MARK: - Real inputs

    @Test(arguments: ArchiveFixtures.modelCaches)
    func modelCacheDecodesToWhatPlistlibReads(_ name: String) throws {
        let expectation = try #require(ArchiveFixtures.expectations[name], "expectations.json has \(name)")
        let data = try ArchiveFixtures.data(name)
        #expect(data.count == expectation.bytes)
        let value = try BinaryPropertyList.decode(data)
        #expect(ArchiveFixtures.sha256Hex(ArchiveFixtures.canonicalForm(value)) == expectation.canonicalSHA256)

        guard case .dictionary(let envelope) = value, case .array(let objects) = envelope["$objects"] else {
            Issue.record("not a keyed archive: \(value.kindDescription)")
            return
        }
        #expect(objects.count == expectation.objectCount)
        #expect(envelope["$top"] == .dictionary(["root": .uid(expectation.topRoot)]))
        var instances: [String: Int] = [:]
        for case .dictionary(let object) in objects {
            guard case .uid(let uid) = object["$class"],
                  case .dictionary(let description) = objects[uid],
                  case .string(let name) = description["$classname"] else { continue }
            instances[name, default: 0] += 1
        }
        #expect(instances == expectation.instancesByClass)
    }

    @Test(arguments: ArchiveFixtures.modelCaches)
    func modelCacheReencodesToTheSameValue(_ name: String) throws {
        let value = try BinaryPropertyList.decode(try ArchiveFixtures.data(name))
        let encoded = BinaryPropertyList.encode(value)
        #expect(try BinaryPropertyList.decode(encoded) == value)
    }

    // MARK: - Writer

    /// `plistlib.dumps({'a': [1, 'b', True, 2.5, b'\x00\xff', 'é', -1, 300], 'c': UID(3)}, fmt=FMT_BINARY)`.
    @Test func encoderWritesPlistlibsBytes() throws {
        let value = PropertyListValue.dictionary([
            "a": .array([.integer(1), .string("b"), .bool(true), .real(2.5), .data(Data([0, 0xFF])),
                         .string("é"), .integer(-1), .integer(300)]),
            "c": .uid(3),
        ])
        let expected = "62706c6973743030d20102030c51615163a80405060708090a0b10015162092340040000000000004200ff6100e913ff"
            + "ffffffffffffff11012c8003080d0f111a1c1e1f282b2e373a0000000000000101000000000000000d000000000000"
            + "0000000000000000003c"
        #expect(hex(BinaryPropertyList.encode(value)) == expected)
    }

    @Test func everyKindRoundTrips() throws {
        let many = (0..<300).map { PropertyListValue.string("s\($0)") }   // 2-byte references, long counts
        let value = PropertyListValue.dictionary([
            "bools": .array([.bool(true), .bool(false)]),
            "integers": .array([.integer(0), .integer(255), .integer(256), .integer(65_536), .integer(1 << 32),
                                .integer(.max), .integer(.min), .integer(-1)]),
            "reals": .array([.real(0), .real(-0.5), .real(.infinity), .real(1e300), .real(.leastNonzeroMagnitude)]),
            "date": .date(Date(timeIntervalSinceReferenceDate: 123_456.789)),
            "data": .data(Data((0..<1000).map { UInt8($0 % 251) })),
            "strings": .array([.string(""), .string("ascii"), .string("ünïcödé"), .string("emoji 🎉 𝄞"),
                               .string(String(repeating: "x", count: 70_000))]),
            "uids": .array([.uid(0), .uid(255), .uid(256), .uid(70_000)]),
            "many": .array(many),
            "nested": .dictionary(["deeper": .dictionary(["deepest": .array([.array([])])])]),
            "ünicode key": .string("v"),
        ])
        #expect(try BinaryPropertyList.decode(BinaryPropertyList.encode(value)) == value)
    }

    @Test func equalScalarsAreWrittenOnce() throws {
        let value = PropertyListValue.array(Array(repeating: .string("same"), count: 20))
        let bytes = BinaryPropertyList.encode(value)
        // 8 header + array (marker, count 0x10 0x14, 20 refs) + string (5) + offsets (2 × 1) + trailer (32).
        #expect(bytes.count == 8 + 23 + 5 + 2 + 32)
    }

    // MARK: - Hand-made inputs

    @Test func sixteenByteIntegerReadsWhenItFitsInt64() throws {
        let fits = ArchiveFixtures.assemble([[0x14] + [UInt8](repeating: 0, count: 8) + [0, 0, 0, 0, 0, 0, 0x01, 0x2C]])
        #expect(try BinaryPropertyList.decode(fits) == .integer(300))
        let negative = ArchiveFixtures.assemble([[0x14] + [UInt8](repeating: 0xFF, count: 16)])
        #expect(try BinaryPropertyList.decode(negative) == .integer(-1))
        let tooLarge = ArchiveFixtures.assemble([[0x14, 0, 0, 0, 0, 0, 0, 0, 1] + [UInt8](repeating: 0, count: 8)])
        expectError(.unsupportedValue, decoding: tooLarge, mentions: "128-bit")
    }

    @Test func setsReadAsArraysAndFloatsWiden() throws {
        let set = ArchiveFixtures.assemble([[0xC2, 1, 2], [0x22, 0x3F, 0xC0, 0, 0], [0x09]])
        #expect(try BinaryPropertyList.decode(set) == .array([.real(1.5), .bool(true)]))
    }

    @Test func utf16StringsWithSurrogatePairsRead() throws {
        let clef = ArchiveFixtures.assemble([[0x62, 0xD8, 0x34, 0xDD, 0x1E]])
        #expect(try BinaryPropertyList.decode(clef) == .string("𝄞"))
        let unpaired = ArchiveFixtures.assemble([[0x61, 0xD8, 0x34]])
        expectError(.invalidObject, decoding: unpaired, mentions: "surrogate")
    }

    @Test func dictionaryKeysMustBeStrings() {
        let data = ArchiveFixtures.assemble([[0xD1, 1, 2], [0x10, 5], [0x09]])
        expectError(.unsupportedValue, decoding: data, mentions: "not a string")
    }

    @Test func nullAndFillObjectsThrow() {
        expectError(.unsupportedValue, decoding: ArchiveFixtures.assemble([[0x00]]), mentions: "null")
        expectError(.unsupportedValue, decoding: ArchiveFixtures.assemble([[0x0F]]), mentions: "fill")
        expectError(.invalidObject, decoding: ArchiveFixtures.assemble([[0x70]]), mentions: "marker 0x70")
    }

    @Test func arrayContainingItselfIsACycle() {
        expectError(.cycle, decoding: ArchiveFixtures.assemble([[0xA1, 0]]), mentions: "object 0 contains itself")
        // Through another container: 0 → 1 → 0.
        expectError(.cycle, decoding: ArchiveFixtures.assemble([[0xA1, 1], [0xD1, 2, 0], [0x51, 0x6B]]), mentions: "contains itself")
    }

    @Test func sharedContainersThatExpandExponentiallyThrow() {
        // Array k holds array k-1 twice: 2^60 values from 61 objects, nested within the depth limit.
        var objects: [[UInt8]] = [[0x09]]
        for k in 1...60 { objects.append([0xA2, UInt8(k - 1), UInt8(k - 1)]) }
        let data = ArchiveFixtures.assemble(objects, top: 60)
        expectError(.tooComplex, decoding: data, mentions: "expand")
    }

    @Test func nestingDeeperThanTheLimitThrows() {
        let depth = BinaryPropertyList.maximumDepth + 10
        let objects = (0..<depth).map { $0 == depth - 1 ? [UInt8(0x09)] : [0xA1] + bigEndian($0 + 1, size: 2) }
        let data = ArchiveFixtures.assemble(objects, referenceSize: 2)
        expectError(.tooComplex, decoding: data, mentions: "deeper than \(BinaryPropertyList.maximumDepth)")
        let limit = BinaryPropertyList.maximumDepth
        let allowed = (0..<limit).map { $0 == limit - 1 ? [UInt8(0x09)] : [0xA1] + bigEndian($0 + 1, size: 2) }
        #expect(throws: Never.self) { try BinaryPropertyList.decode(ArchiveFixtures.assemble(allowed, referenceSize: 2)) }
    }

    @Test func trailerAndOffsetsOutsideTheDataThrow() {
        let valid: [[UInt8]] = [[0xA1, 1], [0x09]]
        expectError(.invalidTrailer, decoding: ArchiveFixtures.assemble(valid, objectCount: 1 << 40), mentions: "object count")
        expectError(.invalidTrailer, decoding: ArchiveFixtures.assemble(valid, objectCount: 0), mentions: "object count")
        expectError(.invalidTrailer, decoding: ArchiveFixtures.assemble(valid, top: 7), mentions: "top object 7")
        expectError(.invalidTrailer, decoding: ArchiveFixtures.assemble(valid, tableOffset: 1 << 62), mentions: "offset table")
        expectError(.invalidTrailer, decoding: ArchiveFixtures.assemble(valid, referenceSize: 0), mentions: "reference size 0")
        expectError(.invalidTrailer, decoding: ArchiveFixtures.assemble(valid, offsetSize: 9), mentions: "offset size 9")
        expectError(.outOfBounds, decoding: ArchiveFixtures.assemble([[0xA1, 9], [0x09]]), mentions: "reference 9")
        // A string claiming 2^40 bytes, and a data object running into the offset table.
        expectError(.outOfBounds, decoding: ArchiveFixtures.assemble([[0x5F, 0x13, 0, 0, 1, 0, 0, 0, 0, 0]]), mentions: "count")
        expectError(.outOfBounds, decoding: ArchiveFixtures.assemble([[0x4E, 1, 2]]), mentions: "run past")
        // An offset pointing into the offset table.
        var pointing = [UInt8](ArchiveFixtures.assemble([[0x09]]))
        pointing[10] = 0x0A   // the one offset entry (2 bytes at 9...10) now says 10
        expectError(.outOfBounds, decoding: Data(pointing), mentions: "offset 10")
    }

    @Test func headerAndLengthAreChecked() {
        expectError(.notBinaryPropertyList, decoding: Data(), mentions: "bplist00")
        expectError(.notBinaryPropertyList, decoding: Data("<?xml version=\"1.0\"?><plist></plist>".utf8), mentions: "bplist00")
        var other = [UInt8](ArchiveFixtures.assemble([[0x09]]))
        other[7] = UInt8(ascii: "1")
        expectError(.notBinaryPropertyList, decoding: Data(other), mentions: "bplist01")
    }

    // MARK: - Helpers

    private func expectError(_ code: PropertyListError.Code, decoding data: Data, mentions text: String,
                             sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            let value = try BinaryPropertyList.decode(data)
            Issue.record("decoded \(value) instead of throwing \(code)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.contains(text), "\(error.message)", sourceLocation: sourceLocation)
        }
    }

    private func hex(_ data: Data) -> String { data.map { String(format: "%02x", $0) }.joined() }

    private func bigEndian(_ value: Int, size: Int) -> [UInt8] {
        (0..<size).reversed().map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
    }
}
