import Foundation
import Testing
@testable import ObjectGraph

/// Foundation values in keyed archives: every case round-trips, the archive has
/// the layout Apple's archiver writes, the Swift bridging works both ways, and
/// classes, cycles and depths outside the supported set throw.
@Suite struct ArchivedValueTests {
    static let samples: [ArchivedValue] = [
        .null, .bool(true), .bool(false), .integer(0), .integer(-42), .integer(.max), .double(3.25), .double(-0.0),
        .string(""), .string("héllo 🎉"), .date(Date(timeIntervalSinceReferenceDate: 606_520_077.8892)),
        .data(Data([0, 1, 2, 255])), .data(Data()),
        .uuid(UUID(uuidString: "84CD671C-0488-4C86-97A6-8F17D5CF7191")!),
        .url(URL(string: "https://example.com/a%20b?q=1#frag")!), .url(URL(fileURLWithPath: "/tmp/The Trial.file")),
        .array([]), .array([.string("a"), .string("b"), .string("a")]),
        .dictionary([.string("k"): .integer(1), .string("nested"): .array([.null, .bool(false)])]),
        .dictionary([.integer(1): .string("one"), .uuid(UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16))): .double(1)]),
        .set([.string("x"), .integer(2), .date(Date(timeIntervalSinceReferenceDate: 0))]),
        .array([.dictionary([.string("deep"): .set([.array([.url(URL(string: "mailto:a@b.c")!)])])])]),
    ]

    @Test(arguments: samples)
    func valueRoundTripsThroughAnArchive(_ value: ArchivedValue) throws {
        #expect(try ArchivedValue.unarchive(value.archived()) == value)
    }

    @Test(arguments: samples)
    func archiveHasApplesLayout(_ value: ArchivedValue) throws {
        let plist = try BinaryPropertyList.decode(value.archived())
        guard case .dictionary(let envelope) = plist, case .array(let objects) = envelope["$objects"] else {
            Issue.record("not an archive")
            return
        }
        #expect(envelope["$archiver"] == .string("NSKeyedArchiver"))
        #expect(envelope["$version"] == .integer(100_000))
        #expect(envelope["$top"] == .dictionary(["root": .uid(1)]))
        #expect(objects.first == .string("$null"))
        // Class descriptions are written once each.
        let classNames = objects.compactMap { $0.dictionaryValue?["$classname"]?.stringValue }
        #expect(Set(classNames).count == classNames.count)
    }

    /// The bytes Python's plistlib writes for the archive Apple's NSKeyedArchiver makes of `["a", "b"]`.
    @Test func arrayOfStringsArchivesToExactBytes() {
        let expected = "62706c6973743030d4010203040506171a5924617263686976657258246f626a656374735424746f70582476657273"
            + "696f6e5f100f4e534b657965644172636869766572a507080f101155246e756c6cd2090a0b0c5624636c6173735a4e532e6f"
            + "626a656374738004a20d0e8002800351615162d2121314155824636c61737365735a24636c6173736e616d65a21516574e53"
            + "4172726179584e534f626a656374d1181954726f6f74800112000186a008111b242932444a50555c67696c6e70727479828d"
            + "9098a1a4a9ab0000000000000101000000000000001b000000000000000000000000000000b0"
        let bytes = ArchivedValue.array([.string("a"), .string("b")]).archived()
        #expect(bytes.map { String(format: "%02x", $0) }.joined() == expected)
    }

    @Test func equalScalarsAndClassesAreShared() throws {
        let value = ArchivedValue.array([.string("same"), .string("same"), .date(.distantPast), .date(.distantFuture), .integer(3), .integer(3)])
        let archive = try KeyedArchive(data: value.archived())
        // $null, the array, "same", date, NSDate class, date, 3, NSArray class.
        #expect(archive.objects.count == 8)
        #expect(archive.objects[2] == .string("same"))
        #expect(try archive.topObject()?.asElements().count == 6)
    }

    // MARK: - Swift bridging

    @Test func foundationValueCastsToSwiftCollections() throws {
        let strings = try ArchivedValue.unarchive(ArchivedValue(["a", "b"])!.archived())
        #expect(strings.foundationValue as? [String] == ["a", "b"])
        let dictionary = ArchivedValue.dictionary([.string("n"): .integer(3), .string("d"): .double(1.5)])
        let swift = try #require(dictionary.foundationValue as? [String: Any])
        #expect(swift["n"] as? Int == 3)
        #expect(swift["d"] as? Double == 1.5)
        let set = ArchivedValue.set([.string("x"), .string("y")]).foundationValue as? Set<AnyHashable>
        #expect(set == ["x", "y"])
        #expect(ArchivedValue.null.foundationValue is NSNull)
        #expect(ArchivedValue.url(URL(string: "https://a.b")!).foundationValue as? URL == URL(string: "https://a.b"))
        let nested = ArchivedValue.dictionary([.array([.integer(1)]): .set([.string("s")])])
        #expect((nested.foundationValue as? [AnyHashable: Any])?.count == 1)
    }

    @Test func swiftValuesConvert() throws {
        #expect(ArchivedValue("s") == .string("s"))
        #expect(ArchivedValue(true) == .bool(true))
        #expect(ArchivedValue(7) == .integer(7))
        #expect(ArchivedValue(UInt8(7)) == .integer(7))
        #expect(ArchivedValue(UInt64.max) == nil)
        #expect(ArchivedValue(Float(0.5)) == .double(0.5))
        #expect(ArchivedValue(NSNull()) == .null)
        #expect(ArchivedValue(NSNumber(value: 2.5)) == .double(2.5))
        #expect(ArchivedValue(NSNumber(value: 9)) == .integer(9))
        #expect(ArchivedValue(["k": [1, 2]] as [String: Any]) == .dictionary([.string("k"): .array([.integer(1), .integer(2)])]))
        #expect(ArchivedValue(Set(["a"])) == .set([.string("a")]))
        #expect(ArchivedValue(NSArray(array: ["x", 1])) == .array([.string("x"), .integer(1)]))
        #expect(ArchivedValue([Date(timeIntervalSinceReferenceDate: 1)]) == .array([.date(Date(timeIntervalSinceReferenceDate: 1))]))
        #expect(ArchivedValue(AnyHashable("h")) == .string("h"))
        struct Custom {}
        #expect(ArchivedValue(Custom()) == nil)
        #expect(ArchivedValue([Custom()]) == nil)
        for sample in Self.samples where sample != .null {
            #expect(ArchivedValue(sample.foundationValue) == sample, "\(sample)")
        }
    }

    // MARK: - Classes Apple writes that are not plain values

    @Test func decimalNumberReadsAsADouble() throws {
        // NSDecimalNumber 123.45: mantissa 12345 (0x3039) little-endian, exponent -2.
        let objects: [PropertyListValue] = [
            .string("$null"),
            .dictionary(["$class": .uid(2), "NS.exponent": .integer(-2), "NS.length": .integer(1), "NS.negative": .bool(false),
                         "NS.compact": .bool(true), "NS.mantissa.bo": .integer(1),
                         "NS.mantissa": .data(Data([0x39, 0x30] + [UInt8](repeating: 0, count: 14)))]),
            classDescription("NSDecimalNumber", superclasses: ["NSNumber", "NSValue", "NSObject"]),
        ]
        #expect(try ArchivedValue.unarchive(archive(objects)) == .double(123.45))
    }

    @Test func urlWithABaseResolves() throws {
        let objects: [PropertyListValue] = [
            .string("$null"),
            .dictionary(["$class": .uid(3), "NS.base": .uid(2), "NS.relative": .string("b/c.txt")]),
            .dictionary(["$class": .uid(3), "NS.base": .uid(0), "NS.relative": .string("https://example.com/a/")]),
            classDescription("NSURL"),
        ]
        #expect(try ArchivedValue.unarchive(archive(objects)) == .url(URL(string: "https://example.com/a/b/c.txt")!))
    }

    @Test func unknownClassInsideAValueNamesTheClassAndPath() throws {
        let objects: [PropertyListValue] = [
            .string("$null"),
            .dictionary(["$class": .uid(4), "NS.keys": .array([.uid(2)]), "NS.objects": .array([.uid(3)])]),
            .string("cover"),
            .dictionary(["$class": .uid(5), "text": .string("default cover")]),
            classDescription("NSMutableDictionary", superclasses: ["NSDictionary", "NSObject"]),
            classDescription("CoreDataPlus_Tests.Cover"),
        ]
        do {
            _ = try ArchivedValue.unarchive(archive(objects))
            Issue.record("decoded a custom class")
        } catch {
            #expect(error.code == .unsupportedClass)
            #expect(error.path == "root.cover")
            #expect(error.message.contains("CoreDataPlus_Tests.Cover"))
        }
    }

    @Test func cyclesDepthAndExpansionThrow() throws {
        let selfContaining: [PropertyListValue] = [
            .string("$null"), .dictionary(["$class": .uid(2), "NS.objects": .array([.uid(1)])]), classDescription("NSArray"),
        ]
        expectTooComplex(selfContaining, mentions: "contains itself")

        var deep: [PropertyListValue] = [.string("$null")]
        for uid in 1...300 { deep.append(.dictionary(["$class": .uid(301), "NS.objects": .array(uid < 300 ? [.uid(uid + 1)] : [])])) }
        deep.append(classDescription("NSArray"))
        expectTooComplex(deep, mentions: "deeper than")

        var wide: [PropertyListValue] = [.string("$null")]
        for uid in 1...60 { wide.append(.dictionary(["$class": .uid(61), "NS.objects": .array(uid < 60 ? [.uid(uid + 1), .uid(uid + 1)] : [])])) }
        wide.append(classDescription("NSArray"))
        expectTooComplex(wide, mentions: "expand")
    }

    // MARK: - Helpers

    private func classDescription(_ name: String, superclasses: [String] = ["NSObject"]) -> PropertyListValue {
        .dictionary(["$classname": .string(name), "$classes": .array(([name] + superclasses).map(PropertyListValue.string))])
    }

    private func archive(_ objects: [PropertyListValue]) -> Data {
        BinaryPropertyList.encode(.dictionary([
            "$archiver": .string("NSKeyedArchiver"), "$version": .integer(100_000),
            "$top": .dictionary(["root": .uid(1)]), "$objects": .array(objects),
        ]))
    }

    private func expectTooComplex(_ objects: [PropertyListValue], mentions text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            _ = try ArchivedValue.unarchive(archive(objects))
            Issue.record("decoded", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == .tooComplex, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.contains(text) && error.path.hasPrefix("root"), "\(error)", sourceLocation: sourceLocation)
        }
    }
}
