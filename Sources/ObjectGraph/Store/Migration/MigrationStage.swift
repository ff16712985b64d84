import Foundation

/// One step of a staged migration: a run of model versions that lightweight
/// migration can move between, or one custom step between two versions
/// (Core Data: `NSLightweightMigrationStage`, `NSCustomMigrationStage`).
///
/// ```swift
/// let v = try ManagedObjectModel.versions(in: modelURL)
/// let stages: [MigrationStage] = [
///     .lightweight([v[0], v[1]]),
///     .custom(from: v[1], to: v[2], label: "colors become entities",
///             willMigrate: { context in /* read what the schema change drops */ },
///             didMigrate: { context in /* fill in what it adds */ }),
///     .lightweight([v[2], v[3]]),
/// ]
/// ```
///
/// Stages join end to end: each stage starts with the model the stage before
/// it ends with. See ``StagedMigrationManager`` for how they run.
///
/// ## Topics
/// - ``lightweight(_:label:)``
/// - ``custom(from:to:label:willMigrate:didMigrate:)``
public struct MigrationStage: Sendable {
    /// A handler of a custom stage. It gets a private-queue context on the
    /// store being migrated, and runs inside that context's `performAndWait`.
    public typealias Handler = @Sendable (ManagedObjectContext) throws -> Void

    /// What the stage does, as stores run it.
    @_spi(StoreImplementation)
    public enum Kind: Sendable {
        case lightweight([ManagedObjectModel])
        case custom(from: ManagedObjectModel, to: ManagedObjectModel, willMigrate: Handler?, didMigrate: Handler?)
    }

    @_spi(StoreImplementation)
    public let kind: Kind
    /// A name for the stage, used in errors and progress (Core Data: `NSMigrationStage.label`).
    public var label: String?

    /// A run of model versions, oldest first, each of which lightweight
    /// (inferred) migration can reach from the one before it
    /// (Core Data: `NSLightweightMigrationStage`).
    ///
    /// A store written with any of these models is migrated through every
    /// later one in turn, each in its own transaction, never straight to the
    /// last: a mapping inferred between neighbours is the one the app's
    /// authors could test. (Core Data has been seen to skip intermediate
    /// versions of a lightweight stage; stepping through them is the safe choice.)
    /// A stage of one model only marks where the chain starts.
    public static func lightweight(_ models: [ManagedObjectModel], label: String? = nil) -> MigrationStage {
        MigrationStage(kind: .lightweight(models), label: label)
    }

    /// A step from one model version to the next that needs code of yours
    /// (Core Data: `NSCustomMigrationStage`).
    ///
    /// The stage runs in three parts, each on the copy of the store being migrated:
    /// 1. `willMigrate` gets a context on the store as it is, with the `from`
    ///    model: read (into memory) what the schema change will drop, or
    ///    prepare values, for example set a default where a property becomes required;
    /// 2. the schema changes from `from` to `to` as lightweight migration would,
    ///    except that a required attribute or relationship may stay empty;
    /// 3. `didMigrate` gets a context with the `to` model: fill in the new
    ///    entities and required values.
    ///
    /// Each handler's saves go into the copy; changes a handler leaves unsaved
    /// are saved when it returns (Core Data would drop them, leaving the
    /// stage half done). After `didMigrate`, every row must
    /// have a value for every required attribute and to-one relationship of
    /// the `to` model, or the stage fails.
    ///
    /// Work with ``ManagedObject`` and entity names in the handlers, not your
    /// subclasses, which describe the newest model. To carry values from
    /// `willMigrate` to `didMigrate` (a column that the change drops), capture
    /// a `Sendable` box, for example a `Mutex<[String: String]>`, in both
    /// closures; it holds one entry per row, so keep entries small.
    public static func custom(from: ManagedObjectModel, to: ManagedObjectModel, label: String? = nil,
                              willMigrate: Handler? = nil, didMigrate: Handler? = nil) -> MigrationStage {
        MigrationStage(kind: .custom(from: from, to: to, willMigrate: willMigrate, didMigrate: didMigrate), label: label)
    }

    /// The stage's models, oldest first.
    var models: [ManagedObjectModel] {
        switch kind {
        case .lightweight(let models): models
        case .custom(let from, let to, _, _): [from, to]
        }
    }

    /// "stage 2 (custom, "label")", for messages; `index` counts from 0.
    @_spi(StoreImplementation)
    public func name(at index: Int) -> String {
        let kindName = switch kind {
        case .lightweight: "lightweight"
        case .custom: "custom"
        }
        return "stage \(index + 1) (\(kindName)" + (label.map { ", \"\($0)\"" } ?? "") + ")"
    }
}
