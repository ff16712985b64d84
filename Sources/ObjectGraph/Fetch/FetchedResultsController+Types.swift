import Foundation
@_spi(DataStackInternal) import DataStackSupport

// The values a FetchedResultsController hands out: index paths, snapshots,
// differences, section infos, its delegate protocol and its error.

// MARK: - Index paths

/// The place of an object in a sectioned list: a section and an item in it
/// (UIKit's `IndexPath(item:section:)`).
///
/// Foundation's `IndexPath` exists on Linux but without the `section` and
/// `item` accessors UIKit adds, so the controller uses this small value. Convert
/// with ``init(_:)`` and ``indexPath``, which use Foundation's two-element
/// `[section, item]` layout.
public struct FetchedIndexPath: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The section's index.
    public var section: Int
    /// The item's index in its section.
    public var item: Int

    public init(item: Int, section: Int) {
        self.item = item
        self.section = section
    }

    /// Reads a Foundation index path `[section, item]`; nil for any other length.
    public init?(_ indexPath: IndexPath) {
        guard indexPath.count == 2 else { return nil }
        self.init(item: indexPath[1], section: indexPath[0])
    }

    /// The Foundation index path `[section, item]`.
    public var indexPath: IndexPath { IndexPath(indexes: [section, item]) }

    public static func < (lhs: FetchedIndexPath, rhs: FetchedIndexPath) -> Bool {
        (lhs.section, lhs.item) < (rhs.section, rhs.item)
    }

    public var description: String { "[\(section), \(item)]" }
}

// MARK: - Changes

/// What happened to an object or a section (Core Data: `NSFetchedResultsChangeType`).
public enum FetchedResultsChangeType: Int, Sendable, Hashable {
    /// It entered the list: it was created or started to match.
    case insert = 1
    /// It left the list: it was deleted or stopped matching.
    case delete = 2
    /// Its place changed because its own sort keys changed (implies an update).
    case move = 3
    /// It changed without moving.
    case update = 4
}

/// The sections and object IDs of a list at one moment: what a diffable data
/// source consumes (Core Data: `NSDiffableDataSourceSnapshot` of the
/// `didChangeContentWith snapshot` callback).
public struct FetchedResultsSnapshot: Sendable, Equatable {
    /// One section: its name and the IDs of its objects, in order.
    public struct Section: Sendable, Equatable {
        public var name: String
        public var itemIdentifiers: [ObjectID]

        public init(name: String, itemIdentifiers: [ObjectID]) {
            self.name = name
            self.itemIdentifiers = itemIdentifiers
        }
    }

    /// The sections, in order. A list without a section key path always has
    /// exactly one section, named `""`, even when it is empty; a sectioned
    /// list has one section per distinct name and none that is empty.
    public var sections: [Section]

    public init(sections: [Section] = []) {
        self.sections = sections
    }

    /// The sections' names, in order.
    public var sectionIdentifiers: [String] { sections.map(\.name) }
    /// Every object ID, section after section.
    public var itemIdentifiers: [ObjectID] { sections.flatMap(\.itemIdentifiers) }
    /// The number of objects.
    public var numberOfItems: Int { sections.reduce(0) { $0 + $1.itemIdentifiers.count } }

    /// The IDs in a section; empty for a name the snapshot lacks.
    public func itemIdentifiers(inSection name: String) -> [ObjectID] {
        sections.first { $0.name == name }?.itemIdentifiers ?? []
    }

    /// Where an ID is, or nil.
    ///
    /// - Complexity: O(*n*); the controller's ``FetchedResultsController/indexPath(forObjectID:)`` is O(1).
    public func indexPath(for objectID: ObjectID) -> FetchedIndexPath? {
        for (sectionIndex, section) in sections.enumerated() {
            if let item = section.itemIdentifiers.firstIndex(of: objectID) {
                return FetchedIndexPath(item: item, section: sectionIndex)
            }
        }
        return nil
    }
}

/// What changed between two snapshots, keyed by object ID, with UIKit's batch
/// update meaning: deletes and the sources of moves use the old index paths,
/// inserts and the destinations of moves the new ones, and objects that are not
/// inserted, deleted or moved keep their order relative to each other.
public struct FetchedResultsDifference: Sendable, Equatable {
    /// A section that appeared or went away.
    public struct SectionChange: Sendable, Equatable {
        public var name: String
        /// The old index for a delete, the new index for an insert.
        public var index: Int
        public var type: FetchedResultsChangeType
    }

    /// An object that entered, left, moved or changed.
    public struct ItemChange: Sendable, Equatable {
        public var objectID: ObjectID
        public var type: FetchedResultsChangeType
        /// Where it was; nil for an insert.
        public var indexPath: FetchedIndexPath?
        /// Where it is now; nil for a delete.
        public var newIndexPath: FetchedIndexPath?
    }

    /// Sections that went away, by old index, and sections that appeared, by new index.
    public var sectionChanges: [SectionChange] = []
    /// Object changes: deletes, then inserts, then moves, then updates.
    public var itemChanges: [ItemChange] = []

    public init() {}

    public var deletes: [ItemChange] { itemChanges.filter { $0.type == .delete } }
    public var inserts: [ItemChange] { itemChanges.filter { $0.type == .insert } }
    public var moves: [ItemChange] { itemChanges.filter { $0.type == .move } }
    public var updates: [ItemChange] { itemChanges.filter { $0.type == .update } }
    /// Whether nothing changed.
    public var isEmpty: Bool { sectionChanges.isEmpty && itemChanges.isEmpty }
}

/// One delivery of a controller: the list as it is now, and how it differs
/// from the previous delivery.
public struct FetchedResultsChange: Sendable, Equatable {
    public var snapshot: FetchedResultsSnapshot
    public var difference: FetchedResultsDifference
}

// MARK: - Sections

/// A section of a controller's list (Core Data: `NSFetchedResultsSectionInfo`).
///
/// A view of the controller at the moment it was read: use it on the context's
/// queue, before the next change.
public struct FetchedResultsSectionInfo<Result: ManagedObject> {
    /// The section's name: the section key path's value as a string (`""` for nil).
    public let name: String
    /// The section's index title: the name's first letter, capitalized (Core Data's default).
    public var indexTitle: String? { name.first.map { String($0).uppercased() } }
    /// The IDs of its objects, in order.
    public let objectIDs: [ObjectID]
    /// How many objects it has (Core Data: `numberOfObjects`).
    public var numberOfObjects: Int { objectIDs.count }

    let controller: FetchedResultsController<Result>
    let sectionIndex: Int

    /// Its objects, as faults where they are not loaded yet. With a batch size,
    /// reading one fires its whole batch in one query.
    public var objects: [Result] { controller.objects(forSection: sectionIndex) }
}

// MARK: - Delegate

/// Receives a controller's changes (Core Data: `NSFetchedResultsControllerDelegate`).
///
/// Every method has an empty default. For one change the controller calls, in
/// order: ``controllerWillChangeContent(_:)``, the section changes (deletes,
/// then inserts), the object changes (deletes, inserts, moves, updates),
/// ``controllerDidChangeContent(_:)``, then
/// ``controller(_:didChangeContentWith:)`` with the whole snapshot and
/// difference. Implement either the first four (table-view style) or the last
/// (diffable style). Calls happen on the context's queue, inside the merge or
/// `processPendingChanges()` that caused them.
///
/// Objects are passed by ``ObjectID``: a deleted object may already be gone
/// from the context, and naming an object must not load it. Use
/// ``FetchedResultsController/object(at:)`` for the new index path.
public protocol FetchedResultsControllerDelegate<Result>: AnyObject {
    associatedtype Result: ManagedObject

    func controllerWillChangeContent(_ controller: FetchedResultsController<Result>)
    func controller(_ controller: FetchedResultsController<Result>, didChangeSection name: String,
                    atSectionIndex sectionIndex: Int, for type: FetchedResultsChangeType)
    func controller(_ controller: FetchedResultsController<Result>, didChange objectID: ObjectID,
                    at indexPath: FetchedIndexPath?, for type: FetchedResultsChangeType,
                    newIndexPath: FetchedIndexPath?)
    func controllerDidChangeContent(_ controller: FetchedResultsController<Result>)
    func controller(_ controller: FetchedResultsController<Result>, didChangeContentWith change: FetchedResultsChange)
}

extension FetchedResultsControllerDelegate {
    public func controllerWillChangeContent(_ controller: FetchedResultsController<Result>) {}
    public func controller(_ controller: FetchedResultsController<Result>, didChangeSection name: String,
                           atSectionIndex sectionIndex: Int, for type: FetchedResultsChangeType) {}
    public func controller(_ controller: FetchedResultsController<Result>, didChange objectID: ObjectID,
                           at indexPath: FetchedIndexPath?, for type: FetchedResultsChangeType,
                           newIndexPath: FetchedIndexPath?) {}
    public func controllerDidChangeContent(_ controller: FetchedResultsController<Result>) {}
    public func controller(_ controller: FetchedResultsController<Result>, didChangeContentWith change: FetchedResultsChange) {}
}

// MARK: - Errors

/// A controller that can't fetch: what is wrong with its request.
///
/// ```swift
/// catch let error as FetchedResultsControllerError where error.code == .missingSortDescriptors { … }
/// ```
public struct FetchedResultsControllerError: CodedError, Sendable, Equatable {
    /// The kind of failure (see ``ErrorCode``).
    public struct Code: ErrorCode {
        public typealias Failure = FetchedResultsControllerError
        /// The code's name, as written in Swift (`"missingSortDescriptors"`).
        public let description: String
        private init(_ name: String) { description = name }

        /// The request has no sort descriptors; a list needs an order.
        public static let missingSortDescriptors = Code("missingSortDescriptors")
        /// The request's result type is not `.managedObject`.
        public static let wrongResultType = Code("wrongResultType")
        /// The first sort descriptor does not group objects by the section key path.
        public static let sectionsNotGrouped = Code("sectionsNotGrouped")
    }

    /// The kind of failure.
    public var code: Code
    /// The request's entity.
    public var entityName: String
    /// What is wrong, in words.
    public var message: String

    public init(_ code: Code, entityName: String, message: String) {
        self.code = code
        self.entityName = entityName
        self.message = message
    }

    public var description: String { "fetched results controller for \(entityName): \(message)" }
}

// MARK: - Checking a difference

extension FetchedResultsDifference {
    /// Replays the difference on `old` with UIKit's batch-update rules and
    /// returns the result, or nil if the difference is inconsistent (an index
    /// out of range, an object both kept and inserted, or objects that are
    /// neither moved nor changed out of order). Tests compare the result with
    /// the new snapshot.
    package func replayed(on old: FetchedResultsSnapshot) -> FetchedResultsSnapshot? {
        var sections = old.sections
        let deletedSections = sectionChanges.filter { $0.type == .delete }.map(\.index)
        guard deletedSections.allSatisfy({ sections.indices.contains($0) }) else { return nil }
        // Objects leaving their old place: deletes and move sources.
        var leaving: [FetchedIndexPath] = []
        for change in itemChanges where change.type == .delete || change.type == .move {
            guard let path = change.indexPath, sections.indices.contains(path.section),
                  sections[path.section].itemIdentifiers.indices.contains(path.item),
                  sections[path.section].itemIdentifiers[path.item] == change.objectID else { return nil }
            leaving.append(path)
        }
        for path in leaving.sorted(by: >) { sections[path.section].itemIdentifiers.remove(at: path.item) }
        for index in deletedSections.sorted(by: >) {
            guard sections[index].itemIdentifiers.isEmpty else { return nil }
            sections.remove(at: index)
        }
        for change in sectionChanges.filter({ $0.type == .insert }).sorted(by: { $0.index < $1.index }) {
            guard change.index <= sections.count else { return nil }
            sections.insert(.init(name: change.name, itemIdentifiers: []), at: change.index)
        }
        // Objects arriving at their new place, in index order so earlier ones make room.
        let arriving = itemChanges.filter { $0.type == .insert || $0.type == .move }
            .compactMap { change in change.newIndexPath.map { (change.objectID, $0) } }
            .sorted { $0.1 < $1.1 }
        for (id, path) in arriving {
            guard sections.indices.contains(path.section), path.item <= sections[path.section].itemIdentifiers.count else { return nil }
            sections[path.section].itemIdentifiers.insert(id, at: path.item)
        }
        return FetchedResultsSnapshot(sections: sections)
    }
}
