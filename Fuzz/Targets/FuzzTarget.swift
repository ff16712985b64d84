import Foundation

/// One way bytes from outside reach DataStack's parsers, run the way a caller
/// would run it: a predicate a user types, a search box's text, a model file,
/// a store's cached model.
///
/// ```swift
/// let target = FuzzTarget.named("predicate")!
/// try target.run(Data("name BEGINSWITH[cd] 'a' AND updates.@count > 2".utf8))
/// ```
///
/// A target may throw: a thrown error is the answer bad input must get. What
/// it may not do is trap, overflow the stack, hang, or allocate without bound;
/// `Fuzz/run` hands each target to libFuzzer to look for exactly that, and
/// `FuzzRegressionTests` replays every input it ever found
/// (`Fuzz/Regressions/<target>/`).
public struct FuzzTarget: Sendable {
    /// The name `Fuzz/run` and `DataStackFuzz` take.
    public let name: String
    /// What the target feeds its input to, for `DataStackFuzz list`.
    public let summary: String
    private let body: @Sendable (Data) throws -> Void
    private let seeding: @Sendable (FuzzSeeds) throws -> [Data]

    init(name: String, summary: String,
         seeds: @escaping @Sendable (FuzzSeeds) throws -> [Data],
         run: @escaping @Sendable (Data) throws -> Void) {
        self.name = name
        self.summary = summary
        self.seeding = seeds
        self.body = run
    }

    /// Runs one input through the target.
    ///
    /// - Throws: whatever the parser throws for this input (the expected
    ///   answer to bad input).
    public func run(_ input: Data) throws {
        try body(input)
    }

    /// The starting inputs for this target, read from the real Core Data files
    /// under `fixtures` (`../shared/fixtures/coredata`), plus the target's own
    /// hand-written seeds.
    ///
    /// - Throws: ``FuzzSeeds/Failure`` when a fixture cannot be read.
    public func seeds(fromFixturesAt fixtures: URL) throws -> [Data] {
        try seeding(FuzzSeeds(fixtures: fixtures))
    }

    /// Every target, in the order `Fuzz/run` runs them.
    public static let all: [FuzzTarget] = [
        .predicate, .searchQuery, .xcodeModel, .legacyModel, .compiledModel, .modelCache, .propertyList,
    ]

    /// The target called `name`, or nil.
    public static func named(_ name: String) -> FuzzTarget? {
        all.first { $0.name == name }
    }
}

/// A folder of this process's own for the files the targets need: the model
/// loaders take files, and the predicate target fetches from a store. It is
/// removed when the process exits normally (a crash leaves it, beside the
/// input that caused it).
enum FuzzScratch {
    static let folder: URL = {
        let folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("datastack-fuzz-\(ProcessInfo.processInfo.processIdentifier)")
        atexit {
            // Nothing depends on the scratch files; a folder left behind is only clutter.
            try? FileManager.default.removeItem(at: FuzzScratch.folder)
        }
        return folder
    }()

    /// `name` inside the scratch folder, whose parent exists (and which itself
    /// exists when `isFolder`). A folder that cannot be made shows up as the
    /// error of the first write into it.
    static func file(_ name: String, isFolder: Bool = false) -> URL {
        let url = folder.appendingPathComponent(name)
        try? FileManager.default.createDirectory(at: isFolder ? url : folder, withIntermediateDirectories: true)
        return url
    }
}
