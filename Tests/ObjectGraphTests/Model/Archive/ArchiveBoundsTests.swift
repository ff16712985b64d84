import Foundation
import Testing
@testable import ObjectGraph
@_spi(DataStackInternal) import DataStackSupport

/// Property lists and keyed archives built to cost far more than their size:
/// trailers claiming millions of objects, shared objects with thousands of
/// keys referenced thousands of times, nesting at the depth limit on a thread
/// with a small stack. Each decodes or throws in time proportional to its
/// bytes; none traps, hangs or allocates gigabytes.
@Suite struct ArchiveBoundsTests {
    /// A property list of `count` objects whose offset table (one byte per
    /// entry) points every object at the one `true` at offset 8.
    static func claimingObjects(_ count: Int) -> Data {
        var bytes = Array("bplist00".utf8) + [0x09]
        bytes += [UInt8](repeating: 8, count: count)
        bytes += [0, 0, 0, 0, 0, 0, 1, 1]
        for field in [UInt64(count), 0, 9] {
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: field >> UInt64(shift))) }
        }
        return Data(bytes)
    }

    @Test func aTrailerClaimingMillionsOfObjectsCostsOnlyTheObjectsRead() throws {
        let data = Self.claimingObjects(48 << 20)
        let clock = ContinuousClock()
        var value: PropertyListValue?
        let elapsed = try clock.measure { value = try BinaryPropertyList.decode(data) }
        #expect(value == .bool(true))
        #expect(elapsed < .seconds(1), "\(elapsed)")
    }

    /// An array of 10,000 references to one object of 10,000 keys (a 200 KB
    /// archive): reaching each element copied the object's keys, 10^8 entries
    /// in all (at 20,000 each, it did not finish in ten minutes).
    @Test func aSharedObjectWithManyKeysReferencedManyTimesIsReadInLinearTime() throws {
        let keys = 10_000
        var objects: [PropertyListValue] = [.string("$null")]
        objects.append(.dictionary(["$classname": .string("NSArray"), "$classes": .array([.string("NSArray"), .string("NSObject")])]))   // 1
        objects.append(.dictionary(["$classname": .string("NSNull"), "$classes": .array([.string("NSNull"), .string("NSObject")])]))     // 2
        var wide: [String: PropertyListValue] = ["$class": .uid(2)]
        for key in 0..<keys { wide["k\(key)"] = .integer(Int64(key)) }
        objects.append(.dictionary(wide))                                                                                                  // 3
        objects.append(.dictionary(["$class": .uid(1), "NS.objects": .array(Array(repeating: .uid(3), count: keys))]))                  // 4
        let data = BinaryPropertyList.encode(.dictionary([
            "$archiver": .string("NSKeyedArchiver"), "$version": .integer(100_000),
            "$top": .dictionary(["root": .uid(4)]), "$objects": .array(objects),
        ]))
        let clock = ContinuousClock()
        var elements: [ArchivedObject] = []
        let elapsed = try clock.measure {
            elements = try #require(try KeyedArchive(data: data).topObject()).asElements()
            // As a value, 10,000 expansions of one object are more than 5 objects may expand to.
            #expect { _ = try ArchivedValue.unarchive(data) } throws: { ($0 as? KeyedArchiveError)?.code == .tooComplex }
        }
        #expect(elements.count == keys && elements.allSatisfy { $0.className == "NSNull" })
        #expect(elements.first?.keys.count == keys)
        #expect(elapsed < .seconds(2), "\(elapsed) for \(data.count) bytes")
    }

    /// Containers nested to the limit, decoded on a thread with a 512 KiB
    /// stack (a secondary thread's default on Apple platforms).
    @Test func nestingAtTheLimitFitsASmallThreadStack() throws {
        let depth = BinaryPropertyList.maximumDepth
        var objects: [[UInt8]] = []
        for level in 0..<depth {
            objects.append(level == depth - 1 ? [0x09] : [0xA1, UInt8((level + 1) >> 8), UInt8((level + 1) & 0xFF)])
        }
        let plist = ArchiveFixtures.assemble(objects, referenceSize: 2)
        var nested = ArchivedValue.bool(true)
        for _ in 0..<ArchivedValue.Decoder.maximumDepth { nested = .array([nested]) }
        let archive = nested.archived()
        let results = Locked<[String]>([])
        let finished = Signal()
        let thread = Thread {
            defer { finished.fire() }
            do {
                _ = try BinaryPropertyList.decode(plist)
                _ = try ArchivedValue.unarchive(archive)
                results.withLock { $0.append("decoded") }
            } catch {
                results.withLock { $0.append("\(error)") }
            }
        }
        thread.stackSize = 512 << 10
        thread.start()
        finished.waitBlocking(for: "decoding on the small-stack thread")
        #expect(results.withLock { $0 } == ["decoded"])
    }
}
