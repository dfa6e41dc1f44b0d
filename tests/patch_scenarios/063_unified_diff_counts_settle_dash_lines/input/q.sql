select 1;
-- old comment
select 2;
