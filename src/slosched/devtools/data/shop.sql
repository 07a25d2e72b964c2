-- A small shop database for the Text-to-SQL workflow runner (slosched.devtools.text2sql_runner).
-- 24 customers, 16 products, 400 orders; the orders are generated deterministically by a recursive CTE so
-- the file stays short and every build of the database holds exactly the same rows.
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    country TEXT NOT NULL,
    joined TEXT NOT NULL  -- ISO date
);
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    price REAL NOT NULL  -- euros
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    product_id INTEGER NOT NULL REFERENCES products(id),
    quantity INTEGER NOT NULL,
    order_date TEXT NOT NULL  -- ISO date
);
INSERT INTO customers (id, name, country, joined) VALUES
    (1, 'Ada Lovelace', 'UK', '2021-01-04'),
    (2, 'Alan Turing', 'UK', '2021-03-17'),
    (3, 'Grace Hopper', 'USA', '2021-05-02'),
    (4, 'Edsger Dijkstra', 'Netherlands', '2021-06-21'),
    (5, 'Barbara Liskov', 'USA', '2021-08-09'),
    (6, 'Donald Knuth', 'USA', '2021-09-30'),
    (7, 'Niklaus Wirth', 'Switzerland', '2021-11-11'),
    (8, 'Konrad Zuse', 'Germany', '2022-01-15'),
    (9, 'Frances Allen', 'USA', '2022-02-28'),
    (10, 'Tony Hoare', 'UK', '2022-04-01'),
    (11, 'Margaret Hamilton', 'USA', '2022-05-19'),
    (12, 'John Backus', 'USA', '2022-06-06'),
    (13, 'Ole-Johan Dahl', 'Norway', '2022-07-23'),
    (14, 'Kristen Nygaard', 'Norway', '2022-08-14'),
    (15, 'Bjarne Stroustrup', 'Denmark', '2022-09-09'),
    (16, 'Guido van Rossum', 'Netherlands', '2022-10-31'),
    (17, 'Hedy Lamarr', 'Austria', '2022-12-12'),
    (18, 'Karen Sparck Jones', 'UK', '2023-01-20'),
    (19, 'Friedrich Bauer', 'Germany', '2023-02-14'),
    (20, 'Heinz Rutishauser', 'Switzerland', '2023-03-03'),
    (21, 'Klaus Samelson', 'Germany', '2023-04-18'),
    (22, 'Peter Naur', 'Denmark', '2023-05-27'),
    (23, 'Adele Goldberg', 'USA', '2023-06-30'),
    (24, 'Leslie Lamport', 'USA', '2023-08-08');
INSERT INTO products (id, name, category, price) VALUES
    (1, 'Mechanical keyboard', 'peripherals', 129.0),
    (2, 'Wireless mouse', 'peripherals', 39.5),
    (3, '27-inch monitor', 'displays', 289.0),
    (4, '34-inch ultrawide', 'displays', 549.0),
    (5, 'USB-C dock', 'accessories', 179.0),
    (6, 'Laptop stand', 'accessories', 45.0),
    (7, 'Noise-cancelling headphones', 'audio', 299.0),
    (8, 'Desk microphone', 'audio', 119.0),
    (9, 'Webcam', 'peripherals', 89.0),
    (10, 'External SSD 1TB', 'storage', 109.0),
    (11, 'NAS 4-bay', 'storage', 459.0),
    (12, 'Ergonomic chair', 'furniture', 399.0),
    (13, 'Standing desk', 'furniture', 649.0),
    (14, 'Cable kit', 'accessories', 19.9),
    (15, 'Portable monitor', 'displays', 229.0),
    (16, 'Bluetooth speaker', 'audio', 79.0);
INSERT INTO orders (id, customer_id, product_id, quantity, order_date)
    WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 400)
    SELECT n, 1 + (n * 7) % 24, 1 + (n * 11 + n / 16) % 16, 1 + (n * 13) % 5,
           date('2023-01-01', '+' || ((n * 37) % 365) || ' days')
    FROM seq;
