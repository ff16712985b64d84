@_spi(StoreImplementation) import ObjectGraph

/// How one entity's rows are read from a full-row select
/// (`SELECT Z_PK, Z_ENT, Z_OPT, <table columns>`): one step per slot, built
/// once when the store maps the model, so decoding a row is a walk over the
/// steps and nothing is looked up per row.
package final class RowLayout: Sendable {
    /// A step is a trivial value (what it refers to lives in the layout's
    /// arrays), so walking the steps of a row retains and releases nothing.
    package enum Step: Sendable {
        /// A slot without a column (transient, to-many): its default, `constants[index]`.
        case constant(index: Int)
        /// An attribute column.
        case attribute(position: Int32, type: AttributeType)
        /// An attribute column with external binary storage: a tagged blob,
        /// or the name of a file (ExternalBinaryStorage.swift).
        case externalData(position: Int32)
        /// A to-one's foreign key; the destination comes from the entity
        /// column when there is one (`entityPosition >= 0`), else it is
        /// `destinations[destination]`.
        case toOne(position: Int32, entityPosition: Int32, destination: Int)
    }

    package let entity: EntityDescription
    package let steps: [Step]
    package let constants: [PropertyValue]
    package let destinations: [EntityDescription?]

    init(entity: EntityDescription, columns: [TableLayout.Column?], slotPositions: [Int32], entityPositions: [Int32],
         externalSlots: Set<Int> = []) {
        self.entity = entity
        let properties = entity.slotProperties
        var constants: [PropertyValue] = []
        var destinations: [EntityDescription?] = []
        steps = properties.indices.map { slot in
            let position = slotPositions[slot]
            guard position >= 0, let column = columns[slot] else {
                constants.append((properties[slot] as? AttributeDescription)?.defaultValue ?? .null)
                return .constant(index: constants.count - 1)
            }
            switch column.kind {
            case .attribute(let type):
                return externalSlots.contains(slot) ? .externalData(position: position) : .attribute(position: position, type: type)
            case .toOne:
                destinations.append((properties[slot] as? RelationshipDescription)?.destinationEntity)
                return .toOne(position: position, entityPosition: entityPositions[slot], destination: destinations.count - 1)
            }
        }
        self.constants = constants
        self.destinations = destinations
    }
}
