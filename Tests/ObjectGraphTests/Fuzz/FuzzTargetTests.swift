import Foundation
import FuzzTargets
import Testing

/// The fuzz targets replayed in the ordinary test run: every input the fuzzer
/// ever found (`Fuzz/Regressions/<target>/`) must now get an answer — accepted,
/// or a thrown error that says what is wrong — instead of a trap, and every
/// target must accept the real Core Data files it is seeded from, or the fuzzer
/// would spend its time on inputs the parser rejects at the first byte.
@Suite("Fuzz targets")
struct FuzzTargetTests {
    static let regressions = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()   // Fuzz
        .deletingLastPathComponent()   // ObjectGraphTests
        .deletingLastPathComponent()   // Tests
        .deletingLastPathComponent()   // the package root
        .appendingPathComponent("Fuzz/Regressions")

    /// Every regression input, as (target, file).
    static let regressionInputs: [RegressionInput] = {
        let folders = (try? FileManager.default.contentsOfDirectory(atPath: regressions.path)) ?? []
        return folders.sorted().flatMap { folder in
            let files = (try? FileManager.default.contentsOfDirectory(atPath: regressions.appendingPathComponent(folder).path)) ?? []
            return files.sorted().map { RegressionInput(target: folder, file: $0) }
        }
    }()

    struct RegressionInput: Sendable, CustomTestStringConvertible {
        let target: String
        let file: String
        var testDescription: String { "\(target)/\(file)" }
        var url: URL { FuzzTargetTests.regressions.appendingPathComponent(target).appendingPathComponent(file) }
    }

    @Test func everyRegressionFolderIsNamedForATarget() throws {
        let folders = try FileManager.default.contentsOfDirectory(atPath: Self.regressions.path)
        #expect(!folders.isEmpty, "Fuzz/Regressions holds no folder")
        for folder in folders {
            #expect(FuzzTarget.named(folder) != nil, "Fuzz/Regressions/\(folder) names no fuzz target")
        }
    }

    @Test(arguments: regressionInputs)
    func aFoundInputIsAnsweredWithoutATrap(_ input: RegressionInput) throws {
        let target = try #require(FuzzTarget.named(input.target))
        let data = try Data(contentsOf: input.url)
        do {
            try target.run(data)
        } catch {
            // The answer to bad input: it must say something a person can act on.
            #expect(String(describing: error).count > 10, "\(input.testDescription) threw \(error)")
        }
    }

    /// How many of each target's fixture seeds it accepts, at least. Model
    /// files all load; of the hand-written predicates and queries a few are
    /// meant to throw (a missing argument, a query of no words); store metadata
    /// plists are not keyed archives, so the property-list target throws after
    /// reading them.
    static let acceptedSeeds: [(target: String, atLeast: Int)] = [
        ("predicate", 10), ("search-query", 8), ("xcode-model", 59), ("legacy-model", 3),
        ("compiled-model", 27), ("model-cache", 27), ("property-list", 30),
    ]

    @Test(arguments: acceptedSeeds.map(\.target))
    func aTargetAcceptsTheFixturesItIsSeededFrom(_ name: String) throws {
        let target = try #require(FuzzTarget.named(name))
        let seeds = try target.seeds(fromFixturesAt: CoreDataFixtures.root)
        var accepted = 0
        var firstError: (any Error)?
        for seed in seeds {
            do {
                try target.run(seed)
                accepted += 1
            } catch {
                firstError = firstError ?? error
            }
        }
        let expected = try #require(Self.acceptedSeeds.first { $0.target == name }).atLeast
        #expect(accepted >= expected, "\(name) accepted \(accepted) of \(seeds.count) seeds; the first error: \(String(describing: firstError))")
    }

    @Test func everyTargetHasSeedsAndTheListNamesThemAll() throws {
        #expect(Set(FuzzTarget.all.map(\.name)) == Set(Self.acceptedSeeds.map(\.target)))
        for target in FuzzTarget.all {
            #expect(try !target.seeds(fromFixturesAt: CoreDataFixtures.root).isEmpty, "\(target.name) has no seeds")
        }
    }
}
