import Foundation

extension BinaryPropertyList {
    /// Writes a value as a binary property list that Apple's `CFPropertyList`,
    /// `NSKeyedUnarchiver` and Python's `plistlib` read.
    ///
    /// The layout follows `plistlib`'s writer, so its output can be compared byte
    /// for byte: objects in depth-first order with the top object first;
    /// dictionary keys sorted by code point, then written as all keys followed by
    /// all values; equal scalars (strings, numbers, booleans, dates, data, UIDs)
    /// written once and shared; containers never shared; integers in the fewest
    /// of 1, 2, 4 or 8 bytes (negative ones in 8); reals always 8 bytes; strings
    /// as ASCII when they are, else UTF-16BE.
    ///
    /// - Complexity: O(*n* log *n*), *n* = values in the tree (the key sort).
    package static func encode(_ value: PropertyListValue) -> Data {
        var writer = Writer()
        writer.flatten(value)
        return writer.write()
    }
}

// MARK: - Writer

extension BinaryPropertyList {
    /// The encoding state: the flattened object table and the shared scalars.
    private struct Writer {
        /// Every object in table order, containers with their element indices.
        private var objects: [Object] = []
        /// The table index of each scalar already written.
        private var scalarIndex: [PropertyListValue: Int] = [:]

        private enum Object {
            case scalar(PropertyListValue)
            case array([Int])
            /// Key indices, then value indices.
            case dictionary(keys: [Int], values: [Int])
        }

        /// Adds `value` and everything it contains to the table; returns its index.
        @discardableResult
        mutating func flatten(_ value: PropertyListValue) -> Int {
            switch value {
            case .array(let elements):
                let index = objects.count
                objects.append(.array([]))
                let children = elements.map { flatten($0) }
                objects[index] = .array(children)
                return index
            case .dictionary(let dictionary):
                let index = objects.count
                objects.append(.array([]))
                let sorted = dictionary.sorted { $0.key.unicodeScalars.lexicographicallyPrecedes($1.key.unicodeScalars) }
                let keys = sorted.map { flatten(.string($0.key)) }
                let values = sorted.map { flatten($0.value) }
                objects[index] = .dictionary(keys: keys, values: values)
                return index
            default:
                if let index = scalarIndex[value] { return index }
                let index = objects.count
                objects.append(.scalar(value))
                scalarIndex[value] = index
                return index
            }
        }

        /// The bytes: header, objects, offset table, trailer.
        func write() -> Data {
            let referenceSize = Self.byteCount(for: UInt64(objects.count))
            var out: [UInt8] = Array("bplist00".utf8)
            var offsets: [UInt64] = []
            offsets.reserveCapacity(objects.count)
            for object in objects {
                offsets.append(UInt64(out.count))
                switch object {
                case .scalar(let value):
                    Self.writeScalar(value, to: &out)
                case .array(let elements):
                    Self.writeSize(0xA0, elements.count, to: &out)
                    for element in elements { Self.append(UInt64(element), size: referenceSize, to: &out) }
                case .dictionary(let keys, let values):
                    Self.writeSize(0xD0, keys.count, to: &out)
                    for reference in keys + values { Self.append(UInt64(reference), size: referenceSize, to: &out) }
                }
            }
            let tableStart = UInt64(out.count)
            let offsetSize = Self.byteCount(for: tableStart)
            for offset in offsets { Self.append(offset, size: offsetSize, to: &out) }
            out += [0, 0, 0, 0, 0, 0, UInt8(offsetSize), UInt8(referenceSize)]
            Self.append(UInt64(objects.count), size: 8, to: &out)
            Self.append(0, size: 8, to: &out)   // the top object is the first one flattened
            Self.append(tableStart, size: 8, to: &out)
            return Data(out)
        }

        private static func writeScalar(_ value: PropertyListValue, to out: inout [UInt8]) {
            switch value {
            case .bool(let bool):
                out.append(bool ? 0x09 : 0x08)
            case .integer(let integer):
                writeInteger(integer, to: &out)
            case .real(let real):
                out.append(0x23)
                append(real.bitPattern, size: 8, to: &out)
            case .date(let date):
                out.append(0x33)
                append(date.timeIntervalSinceReferenceDate.bitPattern, size: 8, to: &out)
            case .data(let data):
                writeSize(0x40, data.count, to: &out)
                out += data
            case .string(let string):
                if string.utf8.allSatisfy({ $0 < 0x80 }) {
                    writeSize(0x50, string.utf8.count, to: &out)
                    out += string.utf8
                } else {
                    let units = Array(string.utf16)
                    writeSize(0x60, units.count, to: &out)
                    for unit in units { out += [UInt8(unit >> 8), UInt8(unit & 0xFF)] }
                }
            case .uid(let uid):
                // plistlib: 1, 2, 4 or 8 bytes (marker 0x80, 0x81, 0x83, 0x87).
                let size = byteCount(for: UInt64(max(uid, 0)))
                out.append(0x80 | UInt8(size - 1))
                append(UInt64(max(uid, 0)), size: size, to: &out)
            case .array, .dictionary:
                preconditionFailure("containers are flattened, not written as scalars")
            }
        }

        /// An integer object: unsigned in 1, 2 or 4 bytes when it fits, else 8 bytes signed.
        private static func writeInteger(_ value: Int64, to out: inout [UInt8]) {
            if value < 0 {
                out.append(0x13)
                append(UInt64(bitPattern: value), size: 8, to: &out)
            } else if value < 1 << 8 {
                out.append(0x10)
                append(UInt64(value), size: 1, to: &out)
            } else if value < 1 << 16 {
                out.append(0x11)
                append(UInt64(value), size: 2, to: &out)
            } else if value < 1 << 32 {
                out.append(0x12)
                append(UInt64(value), size: 4, to: &out)
            } else {
                out.append(0x13)
                append(UInt64(value), size: 8, to: &out)
            }
        }

        /// A marker with the count in its low nibble, or `0xF` and an integer object.
        private static func writeSize(_ marker: UInt8, _ count: Int, to out: inout [UInt8]) {
            if count < 15 {
                out.append(marker | UInt8(count))
            } else {
                out.append(marker | 0x0F)
                writeInteger(Int64(count), to: &out)
            }
        }

        /// The fewest of 1, 2, 4 or 8 bytes that hold `count`.
        private static func byteCount(for count: UInt64) -> Int {
            if count < 1 << 8 { return 1 }
            if count < 1 << 16 { return 2 }
            if count < 1 << 32 { return 4 }
            return 8
        }

        private static func append(_ value: UInt64, size: Int, to out: inout [UInt8]) {
            for shift in stride(from: (size - 1) * 8, through: 0, by: -8) {
                out.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
            }
        }
    }
}
