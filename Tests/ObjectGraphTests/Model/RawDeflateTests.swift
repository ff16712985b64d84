import Foundation
import Testing
@testable import ObjectGraph

/// The `Z_MODELCACHE` inflater on hostile and damaged streams: a deflate bomb
/// stops at the documented limit, quickly; every truncation and corruption of
/// a real cache throws. The limit must also hold for what comes next: a cache
/// that inflates to a property list claiming millions of objects.
@Suite struct RawDeflateTests {
    @Test func theLargestRealCacheInflatesFarBelowTheLimit() throws {
        // NoteStore's (macOS 26): the largest of the fixtures' 27 model caches, 36,773 bytes compressed.
        let inflated = try CompiledModelLoaderTests.modelCache(of: CompiledModelLoaderTests.noteStore).archive
        #expect(inflated.count == 74_787)
        #expect(inflated.count * 200 < RawDeflate.maximumInflatedSize)
    }

    /// 16 KiB of DEFLATE that would inflate to 16 MiB and one byte.
    @Test func aDeflateBombStopsAtTheLimitQuickly() throws {
        let bomb = try RawDeflate.deflate(Data(count: RawDeflate.maximumInflatedSize + 1))
        #expect(bomb.count < 20_000)
        let clock = ContinuousClock()
        let elapsed = clock.measure {
            #expect {
                _ = try RawDeflate.inflate(bomb)
            } throws: { error in
                "\(error)".contains("more than \(RawDeflate.maximumInflatedSize) bytes")
            }
        }
        #expect(elapsed < .seconds(1))
        #expect(try RawDeflate.inflate(RawDeflate.deflate(Data(count: RawDeflate.maximumInflatedSize))).count == RawDeflate.maximumInflatedSize)
    }

    /// 60 KiB of DEFLATE that inflate to a property list of 60 million
    /// objects: under the old 64 MiB limit the reader then allocated gigabytes.
    @Test func aCacheInflatingToAHugePropertyListIsRefusedQuickly() throws {
        let bomb = try RawDeflate.deflate(ArchiveBoundsTests.claimingObjects(60 << 20))
        let clock = ContinuousClock()
        let elapsed = clock.measure {
            #expect(throws: (any Error).self) { _ = try KeyedArchive(data: RawDeflate.inflate(bomb)) }
        }
        #expect(elapsed < .seconds(2))
    }

    @Test func everyTruncationOfARealCacheThrows() throws {
        let compressed = try CompiledModelLoaderTests.modelCache(of: CompiledModelLoaderTests.sampleStore).compressed
        for length in 0..<compressed.count {
            #expect(throws: RawDeflate.Failure.self) { _ = try RawDeflate.inflate(compressed.prefix(length)) }
        }
    }

    @Test func garbageAndFlippedBytesThrowOrInflateWithinTheLimit() throws {
        let compressed = try CompiledModelLoaderTests.modelCache(of: CompiledModelLoaderTests.sampleStore).compressed
        var random = SplitMix64(seed: 0x5EED_DEF1)
        for _ in 0..<500 {
            var mutated = compressed
            for _ in 0..<(1 + Int.random(in: 0..<4, using: &random)) {
                mutated[Int.random(in: 0..<mutated.count, using: &random)] ^= UInt8.random(in: 1...0xFF, using: &random)
            }
            do {
                #expect(try RawDeflate.inflate(mutated).count <= RawDeflate.maximumInflatedSize)
            } catch {
                #expect("\(error)".contains("compressed data"), "\(error)")
            }
        }
        for length in [1, 2, 100, 4096] {
            let garbage = Data((0..<length).map { _ in UInt8.random(in: 0...0xFF, using: &random) })
            #expect(throws: RawDeflate.Failure.self) { _ = try RawDeflate.inflate(garbage) }
        }
    }
}
