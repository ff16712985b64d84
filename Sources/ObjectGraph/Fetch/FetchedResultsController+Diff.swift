import Foundation

/// A controller's list: object IDs in order, their cached keys, and the sections.
struct FetchedList {
    /// A section: its name and the position of its first object.
    struct Section {
        var name: String
        var start: Int
    }

    private(set) var ids: [ObjectID] = []
    private(set) var keys: [ObjectID: FetchedKeys] = [:]
    private(set) var positions: [ObjectID: Int] = [:]
    private(set) var sections: [Section] = []

    /// A list of sorted entries. Unsectioned, it has one section `""`, even when
    /// empty; sectioned, one per run of equal section names.
    init(entries: [FetchedEntry], sectioned: Bool) {
        ids.reserveCapacity(entries.count)
        keys.reserveCapacity(entries.count)
        positions.reserveCapacity(entries.count)
        for entry in entries where positions[entry.id] == nil {
            positions[entry.id] = ids.count
            keys[entry.id] = entry.keys
            if sectioned, sections.last?.name != entry.keys.sectionName {
                sections.append(Section(name: entry.keys.sectionName, start: ids.count))
            }
            ids.append(entry.id)
        }
        if !sectioned { sections = [Section(name: "", start: 0)] }
    }

    /// The positions of a section's objects.
    func range(ofSection index: Int) -> Range<Int> {
        sections[index].start..<(index + 1 < sections.count ? sections[index + 1].start : ids.count)
    }

    /// The index path of a position. O(log *s*) in the number of sections.
    func indexPath(ofPosition position: Int) -> FetchedIndexPath {
        var low = 0, high = sections.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if sections[middle].start <= position { low = middle } else { high = middle - 1 }
        }
        return FetchedIndexPath(item: position - sections[low].start, section: low)
    }

    /// Whether no section name appears twice, as when the first sort key orders by the section key.
    var sectionsAreGrouped: Bool {
        Set(sections.map(\.name)).count == sections.count
    }

    var snapshot: FetchedResultsSnapshot {
        FetchedResultsSnapshot(sections: sections.indices.map { index in
            .init(name: sections[index].name, itemIdentifiers: Array(ids[range(ofSection: index)]))
        })
    }

    // MARK: - Difference

    /// What changed from `old` to `new`, keyed by ID, with UIKit's batch-update meaning.
    ///
    /// Sections are compared by name. Objects only in `old` are deletes, only
    /// in `new` inserts. Of the objects in both, those that changed section
    /// move; of the rest, the largest set whose relative order is unchanged
    /// stays — preferring objects the change did not touch, then those whose
    /// keys did not change, so an object whose sort key changed is the one
    /// that moves — and the others move. Touched
    /// objects that stay are updates; untouched ones that stay are not reported.
    ///
    /// - Complexity: O(*n* log *n*) in the list's length.
    static func difference(from old: FetchedList, to new: FetchedList, touched: Set<ObjectID>) -> FetchedResultsDifference {
        var difference = FetchedResultsDifference()
        let oldNames = Set(old.sections.map(\.name))
        let newNames = Set(new.sections.map(\.name))
        for (index, section) in old.sections.enumerated() where !newNames.contains(section.name) {
            difference.sectionChanges.append(.init(name: section.name, index: index, type: .delete))
        }
        for (index, section) in new.sections.enumerated() where !oldNames.contains(section.name) {
            difference.sectionChanges.append(.init(name: section.name, index: index, type: .insert))
        }

        var deletes: [FetchedResultsDifference.ItemChange] = []
        for (position, id) in old.ids.enumerated() where new.positions[id] == nil {
            deletes.append(.init(objectID: id, type: .delete, indexPath: old.indexPath(ofPosition: position), newIndexPath: nil))
        }
        var inserts: [FetchedResultsDifference.ItemChange] = []
        var common: [(id: ObjectID, old: Int, new: Int)] = []
        for (position, id) in new.ids.enumerated() {
            if let oldPosition = old.positions[id] {
                common.append((id, oldPosition, position))
            } else {
                inserts.append(.init(objectID: id, type: .insert, indexPath: nil, newIndexPath: new.indexPath(ofPosition: position)))
            }
        }

        var moving = Set<ObjectID>()
        var candidates: [(id: ObjectID, old: Int, weight: Int)] = []
        // One untouched object outweighs every touched one, and one touched
        // object whose keys did not change outweighs every one whose keys did.
        let unchangedKeys = common.count + 1
        let untouched = unchangedKeys * unchangedKeys
        for item in common {
            let before = old.keys[item.id], after = new.keys[item.id]
            if before?.sectionName != after?.sectionName {
                moving.insert(item.id)
            } else {
                candidates.append((item.id, item.old, !touched.contains(item.id) ? untouched : (before == after ? unchangedKeys : 1)))
            }
        }
        let staying = heaviestIncreasingRun(candidates, positions: old.ids.count)
        var moves: [FetchedResultsDifference.ItemChange] = []
        var updates: [FetchedResultsDifference.ItemChange] = []
        for item in common {
            let from = old.indexPath(ofPosition: item.old)
            let to = new.indexPath(ofPosition: item.new)
            if moving.contains(item.id) || !staying.contains(item.id) {
                moves.append(.init(objectID: item.id, type: .move, indexPath: from, newIndexPath: to))
            } else if touched.contains(item.id) {
                updates.append(.init(objectID: item.id, type: .update, indexPath: from, newIndexPath: to))
            }
        }
        difference.itemChanges = deletes + inserts + moves + updates
        return difference
    }

    /// The heaviest subsequence of `items` (in new order) whose old positions
    /// increase, by a Fenwick tree of prefix maxima over old positions.
    ///
    /// - Complexity: O(*m* log *n*), *m* = items, *n* = old positions.
    private static func heaviestIncreasingRun(_ items: [(id: ObjectID, old: Int, weight: Int)], positions: Int) -> Set<ObjectID> {
        guard !items.isEmpty else { return [] }
        // tree[i]: the best (total weight, item index) ending at an old position in i's range (1-based).
        var tree = [(weight: Int, item: Int)](repeating: (0, -1), count: positions + 1)
        var total = [Int](repeating: 0, count: items.count)
        var previous = [Int](repeating: -1, count: items.count)
        for (index, item) in items.enumerated() {
            // Best run ending before old position `item.old` (1-based prefix 1...item.old).
            var best = (weight: 0, item: -1)
            var i = item.old
            while i > 0 {
                if tree[i].weight > best.weight { best = tree[i] }
                i -= i & -i
            }
            total[index] = best.weight + item.weight
            previous[index] = best.item
            i = item.old + 1
            while i <= positions {
                if total[index] > tree[i].weight { tree[i] = (total[index], index) }
                i += i & -i
            }
        }
        var end = total.indices.max { total[$0] < total[$1] } ?? -1
        var staying = Set<ObjectID>()
        while end >= 0 {
            staying.insert(items[end].id)
            end = previous[end]
        }
        return staying
    }
}
