import Foundation
import Testing
@testable import ObjectGraph

/// Thousands of broken inputs, derived deterministically from real archives and
/// from random bytes: each one decodes or throws a ``PropertyListError`` or
/// ``KeyedArchiveError`` that says where; none traps or hangs.
@Suite struct KeyedArchiveFuzzTests {
    /// Apple's archive of a `[String: UUID]` dictionary (NoteStore, macOS 26), 555 bytes.
    static let smallArchive = "NoteStore-replica-map.archive"

    @Test func everyTruncationOfARealArchiveThrowsOrDecodes() throws {
        for name in [Self.smallArchive, "SampleModel_V1.modelcache.bplist"] {
            let data = try ArchiveFixtures.data(name)
            for length in 0..<data.count {
                check(data.prefix(length))
            }
        }
    }

    @Test func everyByteOfASmallRealArchiveFlipped() throws {
        let data = try ArchiveFixtures.data(Self.smallArchive)
        #expect(try ArchivedValue.unarchive(data).foundationValue is [AnyHashable: Any])
        for index in data.indices {
            for pattern: UInt8 in [0xFF, 0x01, 0x80] {
                var flipped = data
                flipped[index] ^= pattern
                check(flipped)
            }
        }
    }

    @Test func randomMutationsOfARealModelCache() throws {
        let data = try ArchiveFixtures.data("SampleModel_V1.modelcache.bplist")
        var random = SplitMix64(seed: 0x5EED_0001)
        for _ in 0..<150 {
            var mutated = data
            for _ in 0..<(1 + random.next(below: 6)) {
                let index = random.next(below: data.count)
                mutated[index] = random.next(below: 3) == 0 ? UInt8(random.next(below: 256)) : mutated[index] &+ 1
            }
            check(mutated)
        }
    }

    @Test func randomBytesWithAPlausibleTrailer() {
        var random = SplitMix64(seed: 0x5EED_0002)
        for _ in 0..<1500 {
            let bodyLength = 1 + random.next(below: 120)
            var bytes = Array("bplist00".utf8)
            for _ in 0..<bodyLength {
                // Markers and small numbers most of the time, so parsing gets past the first object.
                bytes.append(random.next(below: 2) == 0 ? UInt8(random.next(below: 256)) : UInt8(random.next(below: 16)) | [0x10, 0x50, 0xA0, 0xD0, 0x80][random.next(below: 5)])
            }
            let objects = 1 + random.next(below: 12)
            let offsetSize = random.next(below: 5) == 0 ? UInt8(random.next(below: 10)) : 1
            let tableStart = UInt64(8 + random.next(below: bodyLength))
            for _ in 0..<objects { bytes.append(UInt8(8 + random.next(below: bodyLength + 4))) }
            bytes += [0, 0, 0, 0, 0, 0, offsetSize, UInt8(1 + random.next(below: 2))]
            for field in [UInt64(objects), UInt64(random.next(below: objects + 1)), random.next(below: 8) == 0 ? UInt64.max - UInt64(random.next(below: 9)) : tableStart] {
                for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: field >> UInt64(shift))) }
            }
            check(Data(bytes))
        }
    }

    @Test func randomArchivesOfRandomObjectTables() {
        // Well-formed property lists whose $objects refer to each other at random.
        var random = SplitMix64(seed: 0x5EED_0003)
        let classNames = ["NSArray", "NSMutableDictionary", "NSSet", "NSString", "NSDate", "NSUUID", "NSURL", "NSData", "NSNull", "Custom"]
        for _ in 0..<500 {
            let count = 2 + random.next(below: 12)
            func reference() -> PropertyListValue { .uid(random.next(below: count + 2)) }
            var objects: [PropertyListValue] = [.string("$null")]
            for _ in 1..<count {
                switch random.next(below: 6) {
                case 0: objects.append(.string("s\(random.next(below: 9))"))
                case 1: objects.append(.integer(Int64(random.next(below: 100))))
                case 2: objects.append(.dictionary(["$classname": .string(classNames[random.next(below: classNames.count)])]))
                default:
                    objects.append(.dictionary([
                        "$class": reference(),
                        "NS.objects": .array((0..<random.next(below: 4)).map { _ in reference() }),
                        "NS.keys": .array((0..<random.next(below: 4)).map { _ in reference() }),
                        "NS.string": random.next(below: 2) == 0 ? .string("x") : reference(),
                        "NS.time": .real(1), "NS.uuidbytes": .data(Data(count: 16)), "NS.relative": reference(), "NS.base": reference(),
                        "NS.data": reference(),
                    ]))
                }
            }
            check(BinaryPropertyList.encode(.dictionary([
                "$archiver": .string("NSKeyedArchiver"), "$version": .integer(100_000),
                "$top": .dictionary(["root": .uid(1)]), "$objects": .array(objects),
            ])))
        }
    }

    // MARK: - Checking one input

    /// Decodes `data` at every layer: the property list, the archive's value, and
    /// every key of every object reachable from the root through every accessor.
    private func check(_ data: Data, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            _ = try BinaryPropertyList.decode(data)
        } catch {
            #expect(error.message.contains("offset") || error.message.contains("object "),
                    "\(error)", sourceLocation: sourceLocation)
            return
        }
        do {
            _ = try ArchivedValue.unarchive(data)
        } catch {
            expectDescriptive(error, sourceLocation: sourceLocation)
        }
        let archive: KeyedArchive
        do {
            archive = try KeyedArchive(data: data)
        } catch {
            expectDescriptive(error, sourceLocation: sourceLocation)
            return
        }
        var visited = Set<Int>()
        var stack: [ArchivedObject] = []
        do {
            if let root = try archive.topObject() { stack.append(root) }
        } catch {
            expectDescriptive(error, sourceLocation: sourceLocation)
        }
        while let object = stack.popLast() {
            if let uid = object.uid, !visited.insert(uid).inserted { continue }
            for key in object.keys {
                attempt(sourceLocation) { _ = try object.string(key) }
                attempt(sourceLocation) { _ = try object.integer(key) }
                attempt(sourceLocation) { _ = try object.bool(key) }
                attempt(sourceLocation) { _ = try object.double(key) }
                attempt(sourceLocation) { _ = try object.data(key) }
                attempt(sourceLocation) { _ = try object.value(key) }
                attempt(sourceLocation) { stack += try object.objects(key) ?? [] }
                attempt(sourceLocation) { stack += try object.entries(key)?.flatMap { [$0.key, $0.value] } ?? [] }
                attempt(sourceLocation) { if let next = try object.object(key) { stack.append(next) } }
            }
        }
    }

    private func attempt(_ sourceLocation: SourceLocation, _ body: () throws -> Void) {
        do {
            try body()
        } catch let error as KeyedArchiveError {
            expectDescriptive(error, sourceLocation: sourceLocation)
        } catch {
            Issue.record("not a KeyedArchiveError: \(error)", sourceLocation: sourceLocation)
        }
    }

    private func expectDescriptive(_ error: KeyedArchiveError, sourceLocation: SourceLocation) {
        let envelope = error.code == .invalidPropertyList || error.code == .notKeyedArchive
        #expect(!error.message.isEmpty && (envelope || error.path.hasPrefix("root")), "\(error)", sourceLocation: sourceLocation)
    }
}

extension SplitMix64 {
    /// A number in `0 ..< bound`.
    fileprivate mutating func next(below bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
