import Foundation
import Observation

/// A live, sectioned list of the objects a fetch request matches, that reports
/// its changes as keyed diffs (Core Data: `NSFetchedResultsController`).
///
/// ```swift
/// var request = FetchRequest<Ticker>()
/// request.sortDescriptors = [FetchSort(key: "price", ascending: false)]
/// request.fetchLimit = 10
/// let topTen = FetchedResultsController(fetchRequest: request, managedObjectContext: stack.mainContext)
/// topTen.delegate = panel                      // table-view style callbacks
/// try topTen.performFetch()
/// Task { for await change in topTen.changes { apply(change.difference) } }   // or diffable style
/// ```
///
/// After ``performFetch()`` the controller follows its context's
/// `objectsDidChangeNotification`: the context's own inserts, updates and
/// deletes, and the saves it merges (a ``StackManager`` merges every importer
/// save into its main context). Each notification becomes at most one change —
/// one diff per merge, however many objects the merge holds — delivered to the
/// ``delegate`` and to every ``changes`` sequence, section changes before
/// object changes, on the context's queue.
///
/// **What a merge costs.** A merge names the objects it inserted and updated,
/// most of which the context has not loaded. Loaded objects are checked in
/// memory. The others, of the list's entity, are checked in the store with one
/// query, `SELF IN {ids} AND (the list's predicate)`, which the SQLite store
/// runs as a primary-key lookup (`Z_PK IN (…)`); the rows that match bring the
/// sort keys needed to place them, and nothing is registered in the context.
/// A list with a ``FetchRequest/fetchLimit`` that loses members asks the store
/// for the best replacements with one more query. So the I/O of a merge grows
/// with the part of the change that touches the list's entity, never with the
/// list or the store, and no object outside the list is faulted. The list's sort
/// keys are kept with its IDs, so reordering never loads an object. (A sort
/// key path through a to-one relationship reads the related rows too, and for
/// a loaded object may load the related object.)
///
/// **Objects.** The controller keeps object IDs and sort keys. Objects are made
/// when read (``object(at:)``, ``fetchedObjects``, a section's `objects`) and
/// then kept alive while they stay in the list. With a
/// ``FetchRequest/fetchBatchSize``, reading an object loads its whole batch in
/// one query and only the two batches read last are kept: the context holds a
/// window of the list, not the list.
///
/// Differences from Core Data: objects in the delegate calls are ``ObjectID``s;
/// there is no section cache (`cacheName`); the list always reflects the
/// context's unsaved changes; tracking runs whether or not a delegate is set.
/// Like Core Data's controller, it learns about changes to the objects of its
/// entity only: a predicate or sort key through a relationship is not
/// re-evaluated when only the related object changes. Objects with equal sort
/// keys keep the order the store gave them; entering ones go after equal ones.
///
/// ## Topics
/// ### Fetching
/// - ``init(fetchRequest:managedObjectContext:sectionNameKeyPath:)``
/// - ``performFetch()``
/// - ``fetchedObjects``
/// - ``fetchedObjectIDs``
/// ### Sections and index paths
/// - ``sections``
/// - ``object(at:)``
/// - ``indexPath(forObject:)``
/// - ``FetchedIndexPath``
/// ### Changes
/// - ``delegate``
/// - ``changes``
/// - ``snapshot``
/// - ``FetchedResultsChange``
public final class FetchedResultsController<Result: ManagedObject> {
    /// The request; changes take effect at the next ``performFetch()``. It needs
    /// at least one sort descriptor and `.managedObject` results.
    public var fetchRequest: FetchRequest<Result>
    /// The context the list lives in; use the controller on its queue.
    public let managedObjectContext: ManagedObjectContext
    /// The key path whose value names each object's section; nil for one
    /// section. The first sort descriptor must order by it.
    public let sectionNameKeyPath: String?
    /// Receives the changes; held weakly.
    public weak var delegate: (any FetchedResultsControllerDelegate<Result>)?

    // MARK: - Internal state (protected by the context's queue)

    /// The list: nil before the first `performFetch()`.
    var list: FetchedList?
    /// What the list was fetched with, fixed at `performFetch()`.
    var plan: FetchPlan?
    /// Objects of the list that were read, kept alive while they stay in the list.
    var retained: [ObjectID: Result] = [:]
    /// With a batch size: the batches read last, oldest first.
    var window: [[ObjectID]] = []
    private var observer: ObserverToken?
    /// Tells observers of ``sections`` and ``fetchedObjects`` (see ``FetchedResultsController+Observation``).
    let observationRegistrar = ObservationRegistrar()
    /// Whether observers may have read the results: set by a read in an
    /// observable context, so that a change is diffed for them.
    var mayHaveObservers = false
    /// Subscribers of `changes`; shared with the iterating tasks.
    let subscribers = StreamSubscribers<FetchedResultsChange>()

    /// Creates a controller; nothing is fetched until ``performFetch()``.
    public init(fetchRequest: FetchRequest<Result>, managedObjectContext: ManagedObjectContext,
                sectionNameKeyPath: String? = nil) {
        self.fetchRequest = fetchRequest
        self.managedObjectContext = managedObjectContext
        self.sectionNameKeyPath = sectionNameKeyPath
    }

    deinit {
        if let observer { NotificationCenter.default.removeObserver(observer.token) }
        subscribers.finishAll()
    }

    // MARK: - Fetching

    /// Fetches the list and starts following the context's changes
    /// (Core Data: `performFetch()`).
    ///
    /// Reads the matching rows in one query (plus the context's unsaved objects
    /// of the entity, checked in memory) and keeps their IDs and sort keys; no
    /// object is registered. Without a batch size the rows stay in the
    /// coordinator's row cache, so reading the objects later costs no query.
    /// Calling it again fetches afresh with the current ``fetchRequest``; the
    /// ``changes`` sequences then receive the difference.
    ///
    /// - Throws: ``FetchedResultsControllerError`` for a request without sort
    ///   descriptors, of another result type, or whose sections are not grouped
    ///   by the first sort descriptor; the context's fetch errors.
    /// - Complexity: one query over the matching rows, O(*n* log *n*) in memory.
    public func performFetch() throws {
        managedObjectContext.assertOnQueue()
        let plan = try FetchPlan(request: fetchRequest, sectionNameKeyPath: sectionNameKeyPath, context: managedObjectContext)
        let previous = list
        self.plan = plan
        let fetched = try load(plan)
        if plan.sectionPath != nil, !fetched.list.sectionsAreGrouped {
            self.plan = nil
            list = nil
            throw FetchedResultsControllerError(.sectionsNotGrouped, entityName: fetchRequest.entityName,
                                                message: "the first sort descriptor must order objects by the section key path '\(sectionNameKeyPath ?? "")'")
        }
        retained = [:]
        window = []
        tellingObservers { list = fetched.list }
        cacheRows(fetched.rows)
        startObserving()
        if subscribers.hasSubscribers {
            let from = previous ?? FetchedList(entries: [], sectioned: plan.sectionPath != nil)
            subscribers.yield(FetchedResultsChange(snapshot: fetched.list.snapshot,
                                                   difference: FetchedList.difference(from: from, to: fetched.list, touched: [])))
        }
    }

    /// The objects in the list, in order; nil before ``performFetch()``.
    ///
    /// Without a batch size the controller keeps them all alive, as faults that
    /// fire from the rows the fetch left in the coordinator's cache. With one,
    /// they are faults grouped in batches (firing one loads its batch) and the
    /// controller does not keep them.
    public var fetchedObjects: [Result]? {
        managedObjectContext.assertOnQueue()
        noteObservedRead()
        guard let list, let plan else { return nil }
        if plan.batchSize == 0 {
            let objects = list.ids.map { materialize($0) }
            if !fetchRequest.returnsObjectsAsFaults { managedObjectContext.fireFaults(objects) }
            return objects
        }
        return batchedObjects(list.ids[...], batchSize: plan.batchSize)
    }

    /// The IDs of the objects in the list, in order; nil before ``performFetch()``. Loads nothing.
    public var fetchedObjectIDs: [ObjectID]? {
        managedObjectContext.assertOnQueue()
        noteObservedRead()
        return list?.ids
    }

    /// The list as a snapshot of section names and object IDs; nil before ``performFetch()``.
    public var snapshot: FetchedResultsSnapshot? {
        managedObjectContext.assertOnQueue()
        noteObservedRead()
        return list?.snapshot
    }

    // MARK: - Sections and index paths

    /// The sections; nil before ``performFetch()`` (Core Data: `sections`).
    public var sections: [FetchedResultsSectionInfo<Result>]? {
        managedObjectContext.assertOnQueue()
        noteObservedRead()
        guard let list else { return nil }
        return list.sections.indices.map { index in
            FetchedResultsSectionInfo(name: list.sections[index].name, objectIDs: Array(list.ids[list.range(ofSection: index)]),
                                      controller: self, sectionIndex: index)
        }
    }

    /// The sections' index titles, without duplicates (Core Data: `sectionIndexTitles`).
    public var sectionIndexTitles: [String] {
        managedObjectContext.assertOnQueue()
        var seen = Set<String>()
        return (list?.sections ?? []).compactMap { section in
            guard let title = section.name.first.map({ String($0).uppercased() }), seen.insert(title).inserted else { return nil }
            return title
        }
    }

    /// The object at an index path (Core Data: `object(at:)`).
    ///
    /// With a batch size, an object not loaded yet loads its whole batch in one query.
    /// An index path outside the list is a programmer error and traps, as in Core Data.
    public func object(at indexPath: FetchedIndexPath) -> Result {
        managedObjectContext.assertOnQueue()
        let position = self.position(of: indexPath)
        let id = list!.ids[position]
        if let object = retained[id] { return object }
        guard let plan, plan.batchSize > 0 else { return materialize(id) }
        let batch = position / plan.batchSize * plan.batchSize
        let ids = Array(list!.ids[batch..<min(batch + plan.batchSize, list!.ids.count)])
        let objects = ids.map { managedObjectContext.object(with: $0) }
        managedObjectContext.fireFaults(objects)
        keepInWindow(ids, objects)
        return retained[id] ?? materialize(id)
    }

    /// The ID at an index path, without loading anything.
    public func objectID(at indexPath: FetchedIndexPath) -> ObjectID {
        managedObjectContext.assertOnQueue()
        return list!.ids[position(of: indexPath)]
    }

    /// Where an object is in the list, or nil (Core Data: `indexPath(forObject:)`). O(1).
    public func indexPath(forObject object: Result) -> FetchedIndexPath? {
        indexPath(forObjectID: object.objectID)
    }

    /// Where the object with this ID is in the list, or nil. O(1); loads nothing.
    public func indexPath(forObjectID objectID: ObjectID) -> FetchedIndexPath? {
        managedObjectContext.assertOnQueue()
        guard let list, let position = list.positions[objectID] else { return nil }
        return list.indexPath(ofPosition: position)
    }

    // MARK: - Changes

    /// The list's changes as an asynchronous sequence: first the current list
    /// (a difference from the empty list) if it was fetched, then one element
    /// per change, for as long as the iterating task runs.
    ///
    /// ```swift
    /// for await change in controller.changes {
    ///     dataSource.apply(change.snapshot)       // or walk change.difference
    /// }
    /// ```
    ///
    /// Elements are buffered without limit, so each difference applies to the
    /// snapshot of the element before it.
    public var changes: AsyncStream<FetchedResultsChange> {
        managedObjectContext.assertOnQueue()
        let (stream, continuation) = AsyncStream.makeStream(of: FetchedResultsChange.self, bufferingPolicy: .unbounded)
        if let list, let plan {
            let empty = FetchedList(entries: [], sectioned: plan.sectionPath != nil)
            continuation.yield(FetchedResultsChange(snapshot: list.snapshot, difference: FetchedList.difference(from: empty, to: list, touched: [])))
        }
        subscribers.add(continuation)
        return stream
    }

    // MARK: - Internal

    private func startObserving() {
        guard observer == nil else { return }
        let box = WeakControllerBox(self)
        let token = NotificationCenter.default.addObserver(forName: ManagedObjectContext.objectsDidChangeNotification,
                                                           object: managedObjectContext, queue: nil) { notification in
            // Posted on the context's queue, inside processPendingChanges() or a merge.
            guard let change = try? ObjectsDidChange(notification) else { return }
            box.controller?.contextDidChange(change)
        }
        observer = ObserverToken(token: token)
    }

    private func position(of indexPath: FetchedIndexPath) -> Int {
        guard let list else { preconditionFailure("FetchedResultsController used before performFetch()") }
        precondition(list.sections.indices.contains(indexPath.section), "section \(indexPath.section) out of range 0..<\(list.sections.count)")
        let range = list.range(ofSection: indexPath.section)
        precondition(indexPath.item >= 0 && indexPath.item < range.count, "item \(indexPath.item) out of range 0..<\(range.count) in section \(indexPath.section)")
        return range.lowerBound + indexPath.item
    }

    /// The object for an ID of the list, kept alive while it stays in the list (no batch size).
    func materialize(_ id: ObjectID) -> Result {
        if let object = retained[id] { return object }
        guard let object = managedObjectContext.object(with: id) as? Result else {
            preconditionFailure("\(id) is not a \(Result.self)")
        }
        if plan?.batchSize ?? 0 == 0 { retained[id] = object }
        return object
    }

    /// Faults for `ids`, grouped so that firing one loads its batch; not kept.
    func batchedObjects(_ ids: ArraySlice<ObjectID>, batchSize: Int) -> [Result] {
        let objects = ids.map { id -> Result in
            if let object = retained[id] { return object }
            guard let object = managedObjectContext.object(with: id) as? Result else { preconditionFailure("\(id) is not a \(Result.self)") }
            return object
        }
        managedObjectContext.groupFaults(objects, batchSize: batchSize)
        return objects
    }

    /// The objects of a section (for `FetchedResultsSectionInfo.objects`).
    func objects(forSection index: Int) -> [Result] {
        managedObjectContext.assertOnQueue()
        guard let list, let plan, list.sections.indices.contains(index) else { return [] }
        let ids = list.ids[list.range(ofSection: index)]
        if plan.batchSize > 0 { return batchedObjects(ids, batchSize: plan.batchSize) }
        return ids.map { materialize($0) }
    }

    /// Keeps a batch alive, dropping the oldest beyond two.
    private func keepInWindow(_ ids: [ObjectID], _ objects: [ManagedObject]) {
        for (id, object) in zip(ids, objects) {
            if let object = object as? Result { retained[id] = object }
        }
        window.append(ids)
        while window.count > 2 {
            let dropped = window.removeFirst()
            let stillKept = Set(window.joined())
            for id in dropped where !stillKept.contains(id) { retained[id] = nil }
        }
    }

    /// After a change: forget objects that left the list.
    func pruneRetained() {
        guard let list else { retained = [:]; window = []; return }
        retained = retained.filter { list.positions[$0.key] != nil }
        window = window.map { $0.filter { list.positions[$0] != nil } }.filter { !$0.isEmpty }
    }

    /// Hands a change to the delegate, then to the `changes` sequences.
    func deliver(_ change: FetchedResultsChange) {
        if let delegate {
            delegate.controllerWillChangeContent(self)
            for section in change.difference.sectionChanges {
                delegate.controller(self, didChangeSection: section.name, atSectionIndex: section.index, for: section.type)
            }
            for item in change.difference.itemChanges {
                delegate.controller(self, didChange: item.objectID, at: item.indexPath, for: item.type, newIndexPath: item.newIndexPath)
            }
            delegate.controllerDidChangeContent(self)
            delegate.controller(self, didChangeContentWith: change)
        }
        subscribers.yield(change)
    }
}

// A controller lives on its context's queue, like the objects it lists; pass IDs instead.
@available(*, unavailable)
extension FetchedResultsController: Sendable {}

// MARK: - Helpers

/// A weak reference to a controller for the notification observer.
// @unchecked Sendable: `controller` is read only in the observer, which runs on the context's queue.
final class WeakControllerBox<Controller: AnyObject>: @unchecked Sendable {
    weak var controller: Controller?
    init(_ controller: Controller) { self.controller = controller }
}

extension ManagedObjectContext {
    /// Groups faults so that firing one loads its batch, as a batched fetch does.
    func groupFaults(_ objects: [ManagedObject], batchSize: Int) {
        for start in stride(from: 0, to: objects.count, by: max(1, batchSize)) {
            let members = objects[start..<min(start + batchSize, objects.count)].filter(\.isFault)
            guard members.count > 1 else { continue }
            let batch = FaultBatch(objectIDs: members.map(\.objectID))
            for object in members { faultBatches[object.objectID] = batch }
        }
    }
}
